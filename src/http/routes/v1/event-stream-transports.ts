import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { WebSocket } from 'ws';
import type { EventTail } from '../../../app/event-stream.ts';
import type { LoggedEvent } from '../../../app/events.ts';
import { DomainError } from '../../../domain/errors.ts';
import { statusOf } from '../../errors.ts';
import { errorBody } from '../../plugins/errors.ts';
import { INSTANCE_ID_HEADER } from './events.ts';

/**
 * The two forms of `GET /v1/events/stream` (docs/decisions/0031-event-stream.md): server-sent events and WebSocket,
 * each pumping an {@link EventTail} into its connection one page at a time, taking the next page only once the
 * connection took the last one (so a slow consumer holds one page in memory, never more), with a heartbeat, and
 * ending with a reason the client can act on.
 */

/** How often an idle stream sends a heartbeat (SSE: a comment line; WebSocket: a ping), ms. */
export const HEARTBEAT_MS = 15_000;

/**
 * Heartbeats in a row that may find a server-sent events page still waiting for its consumer before the connection is
 * cut: 2, so a consumer that has not taken a page a whole {@link HEARTBEAT_MS} after a heartbeat found it waiting (15 to
 * 30 s after it stalled) is cut, as a WebSocket peer whose page holds back the ping behind it is (docs/decisions/0031-event-stream.md "Slow
 * consumers").
 */
export const STALLED_HEARTBEATS = 2;

/** WebSocket close code and reason when the server shuts down (RFC 6455 §7.4.1 1001 "going away"). */
export const SHUTDOWN_CLOSE = { code: 1001, reason: 'server shutting down' } as const;

/**
 * How long, ms, a stream's connection gets at shutdown to take its end (SSE: the `end` event and the response's end
 * flushed to the kernel; WebSocket: the close handshake answered) before it is cut (SSE: the socket destroyed;
 * WebSocket: `terminate()`). A consumer that stopped reading never takes it, and would otherwise hold the server's
 * close until the shutdown deadline (or ws's own 30 s close timeout): streams never hold a stop back
 * (docs/decisions/0031-event-stream.md "Shutdown"). A reading consumer takes it within a round trip.
 */
export const SHUTDOWN_GRACE_MS = 300;

/**
 * Why a stream ended, as the error envelope its SSE `end` event carries and the WebSocket close code that says the
 * same (docs/decisions/0031-event-stream.md "How it ends"): 4401, 4403, 4404 (the key no longer valid or allowed,
 * the instance no longer addressable), 4409 (the stream's position is past the log's end while the instance is
 * still there: the store lost commits, docs/decisions/0073-event-log-positions-past-the-head.md; the message names
 * the last sequence to resume from) — 4000 plus the HTTP status, in the range RFC 6455 §7.4.2 leaves to
 * applications —, 1013 "try again later" (the store is unavailable), 1001 (shutdown), 1011 (anything else: an
 * internal error, whose text is logged, not sent).
 */
export function endOf(error: unknown): { status: number; message: string; closeCode: number } {
  if (error instanceof DomainError && error.code !== 'internal') {
    const status = statusOf(error.code);
    if (status === 401 || status === 403 || status === 404 || status === 409)
      return { status, message: error.message, closeCode: 4000 + status };
    if (error.code === 'not_ready') return { status, message: error.message, closeCode: SHUTDOWN_CLOSE.code };
    if (status === 503) return { status, message: error.message, closeCode: 1013 };
  }
  return { status: 500, message: 'internal error', closeCode: 1011 };
}

/** The error shutting a stream down (its SSE `end` event says 503). */
const shuttingDown = () => new DomainError('not_ready', SHUTDOWN_CLOSE.reason);

/**
 * Logs the end of a stream that the server ended for a reason other than the client's own doing, with how far it
 * had read (`position`, a sequence).
 */
function logEnd(log: FastifyBaseLogger, error: unknown, position: number): void {
  const { status } = endOf(error);
  if (status >= 500 && !(error instanceof DomainError && error.code === 'not_ready'))
    log.warn({ err: error, position }, 'event stream ended by a server-side failure');
  else log.info({ status, position }, 'event stream ended');
}

/** An entry of the stream: exactly the event log's entry, as JSON text (docs/decisions/0030-event-log.md). */
function entryText(event: LoggedEvent): string {
  return JSON.stringify(event);
}

/** One server-sent event per entry: `id` its sequence, `event` its type, `data` the entry (WHATWG HTML §9.2). */
export function sseText(events: readonly LoggedEvent[]): string {
  return events
    .map((event) => `id: ${event.sequence}\nevent: ${event.type}\ndata: ${entryText(event)}\n\n`)
    .join('');
}

/** A stream open on this node, as its route's shutdown hook sees it. */
export interface OpenStream {
  /**
   * Ends the stream because the server is shutting down (SSE: `end` 503; WebSocket: close 1001), and cuts its
   * connection when that end is not taken within {@link SHUTDOWN_GRACE_MS}.
   */
  shutDown(): void;
}

/**
 * The streams open on this node and whether the server is closing. The route's `preClose` hook sets `closing` and
 * shuts down every stream in `streams`; a stream whose request was still in its hooks then registers later, sees
 * `closing` and shuts itself down at once ({@link register}), so no stream holds a stop back
 * (docs/decisions/0031-event-stream.md "Shutdown").
 */
export interface OpenStreams {
  /** The streams being served. */
  readonly streams: Set<OpenStream>;
  /** True once the server began to close. */
  closing: boolean;
}

/** Adds `stream` to `open`, and shuts it down at once when the server is already closing. */
function register(open: OpenStreams, stream: OpenStream): void {
  open.streams.add(stream);
  if (open.closing) stream.shutDown();
}

/**
 * Runs `cut` after {@link SHUTDOWN_GRACE_MS} unless `done` resolved first (the connection closed cleanly). The timer
 * does not keep the process alive by itself.
 */
function cutAfterGrace(done: Promise<void>, cut: () => void): void {
  const timer = setTimeout(cut, SHUTDOWN_GRACE_MS);
  timer.unref();
  void done.then(() => clearTimeout(timer));
}

/**
 * Serves `tail` as server-sent events on `raw` (the reply was hijacked): headers at once (`x-instance-id` the
 * streamed instance's UUID, `instanceId`: docs/decisions/0091-event-reads-name-their-instance.md), then pages of
 * events, a comment line every {@link HEARTBEAT_MS} while no page waits (a consumer that leaves a page waiting for
 * {@link STALLED_HEARTBEATS} heartbeats has its connection cut), and, when the server ends the stream, an `end` event
 * whose data is the error envelope saying why (401, 403, 404, 409: do not reconnect from there; 503: reconnect with
 * `Last-Event-ID`). Resolves when the stream is over; registers itself in `open` until its response closed (an `end`
 * a stalled consumer has not taken keeps it there), and ends at once with `end` 503 when the server is already
 * closing. At shutdown, a response whose end is not flushed within {@link SHUTDOWN_GRACE_MS} has its socket destroyed.
 */
export async function serveSse(
  raw: ServerResponse,
  tail: EventTail,
  options: { requestId: string; instanceId: string; log: FastifyBaseLogger; open: OpenStreams },
): Promise<void> {
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    connection: 'keep-alive',
    'x-request-id': options.requestId,
    [INSTANCE_ID_HEADER]: options.instanceId,
    'x-content-type-options': 'nosniff',
    // Proxies that buffer answers (nginx) pass this one through as it comes.
    'x-accel-buffering': 'no',
  });
  raw.flushHeaders();
  // A write racing the client's going away fails quietly: the close below ends the stream.
  raw.on('error', () => undefined);
  let ended = false;
  const end = (error: unknown) => {
    if (ended || raw.writableEnded || raw.destroyed) return;
    ended = true;
    const { status, message } = endOf(error);
    raw.end(`event: end\ndata: ${JSON.stringify(errorBody(status, message))}\n\n`);
  };
  // The response's close: its end flushed (the connection may stay open, idle), or its connection gone.
  const closed = new Promise<void>((resolve) => raw.once('close', () => resolve()));
  const stream: OpenStream = {
    shutDown: () => {
      end(shuttingDown());
      tail.close();
      // A consumer that stopped reading never takes the end: its socket would keep the server's close waiting.
      cutAfterGrace(closed, () => {
        if (!raw.writableFinished) raw.destroy();
      });
    },
  };
  register(options.open, stream);
  /** Heartbeats that found a page still waiting for the consumer to take it (0 once it drained). */
  let stalled = 0;
  const heartbeat = setInterval(() => {
    if (ended) return;
    if (!raw.writableNeedDrain) {
      stalled = 0;
      raw.write(': heartbeat\n\n');
      return;
    }
    // A page is waiting: the connection is not idle, and a heartbeat would only pile up behind it. A page the
    // consumer still has not taken at the next heartbeat means a consumer gone or reading nothing, as a WebSocket
    // peer whose page holds back the ping behind it: cut it, so it holds neither its page, its tail and its
    // connection for ever nor escapes the recheck (which runs between pages). It resumes with the `id` of the last
    // whole event it got.
    stalled++;
    if (stalled < STALLED_HEARTBEATS) return;
    options.log.info(
      { position: tail.position },
      'event stream consumer took no page for a heartbeat interval; cutting it',
    );
    raw.destroy();
  }, HEARTBEAT_MS);
  let gone = false;
  // The client's going ends the tail: a pending read answers null, and the loop stops.
  const onGone = () => {
    gone = true;
    tail.close();
  };
  raw.once('close', onGone);
  // A client that left before this handler ran (while the request's hooks worked): its close event has passed.
  if (raw.destroyed) onGone();
  try {
    for (;;) {
      const events = await tail.next();
      if (events === null || ended || gone) return;
      // Backpressure: the next page is read only once this one left the process (or the client went away).
      if (!raw.write(sseText(events))) await drainedOrGone(raw);
    }
  } catch (error) {
    // A write failing because the client went away is the client's doing: nothing to say, nobody to say it to.
    if (raw.destroyed || ended) return;
    logEnd(options.log, error, tail.position);
    end(error);
  } finally {
    // However the stream ends (the client gone, the log's end, a failed read): nothing of it is kept.
    raw.off('close', onGone);
    clearInterval(heartbeat);
    tail.close();
    // An `end` not flushed yet (a consumer that stopped reading) keeps the stream registered until its response
    // closes, so a shutdown meanwhile cuts it instead of waiting for it.
    if (raw.destroyed || raw.writableFinished) options.open.streams.delete(stream);
    else void closed.then(() => options.open.streams.delete(stream));
  }
}

/** Resolves once `raw` drained its buffered writes or closed, whichever comes first; keeps no listener after. */
function drainedOrGone(raw: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    raw.once('drain', done);
    raw.once('close', done);
  });
}

/**
 * Serves `tail` on an open WebSocket: one text frame per entry, pages taken one at a time once the last frame of the
 * previous page was written out, a ping every {@link HEARTBEAT_MS} (a peer that answered none of the previous one is
 * cut: gone, or reading nothing), and a close frame saying why the server ended the stream ({@link endOf}). Frames
 * from the client are ignored. Resolves when the stream is over; registers itself in `open` until the socket
 * closed, and closes at once with 1001 when the server is already closing. At shutdown, a peer that has not answered
 * the close within {@link SHUTDOWN_GRACE_MS} is cut (`terminate()`).
 */
export async function serveWebSocket(
  socket: WebSocket,
  tail: EventTail,
  options: { log: FastifyBaseLogger; open: OpenStreams },
): Promise<void> {
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const stream: OpenStream = {
    shutDown: () => {
      socket.close(SHUTDOWN_CLOSE.code, SHUTDOWN_CLOSE.reason);
      tail.close();
      // A peer that stopped reading never answers the close (ws would wait 30 s): cut it after the grace.
      cutAfterGrace(closed, () => socket.terminate());
    },
  };
  register(options.open, stream);
  let answered = true;
  socket.on('pong', () => {
    answered = true;
  });
  const heartbeat = setInterval(() => {
    // Closing (our close frame sent, the peer's awaited): ping would throw.
    if (socket.readyState !== WebSocket.OPEN) return;
    if (!answered) {
      options.log.info('event stream peer answered no ping; cutting it');
      socket.terminate();
      return;
    }
    answered = false;
    socket.ping();
  }, HEARTBEAT_MS);
  void closed.then(() => {
    clearInterval(heartbeat);
    options.open.streams.delete(stream);
    tail.close();
  });
  try {
    for (;;) {
      const events = await tail.next();
      if (events === null || socket.readyState !== WebSocket.OPEN) return;
      await Promise.race([sendAll(socket, events), closed]);
    }
  } catch (error) {
    // A send failing because the client went away is the client's doing: nothing to say, nobody to say it to.
    if (socket.readyState !== WebSocket.OPEN) return;
    logEnd(options.log, error, tail.position);
    const { message, closeCode } = endOf(error);
    socket.close(closeCode, closeReason(message));
  }
}

/** Sends one text frame per entry; resolves once the last one was written out to the connection. */
function sendAll(socket: WebSocket, events: readonly LoggedEvent[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    events.forEach((event, index) => {
      const last = index === events.length - 1;
      socket.send(entryText(event), last ? (error) => (error ? reject(error) : resolve()) : undefined);
    });
  });
}

/** A close reason fits in 123 bytes (RFC 6455 §5.5.1: a control frame's payload is at most 125, 2 are the code). */
function closeReason(message: string): string {
  let reason = message;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1);
  return reason;
}
