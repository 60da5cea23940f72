/**
 * The stream transport of `client.events()` (docs/client.md "Event log", docs/decisions/0034-client-stream-transport.md):
 * the backlog read in pages of `GET /v1/events` as the polling transport reads it, then `GET /v1/events/stream` as
 * server-sent events (docs/api.md "Event stream"), one batch per event pushed. Server-sent events over `fetch` run
 * wherever `fetch` gives a streamed body: Node 18+, browsers, Deno, Bun, workers. When the connection breaks, goes
 * silent past `idleTimeoutMs`, or the server ends the stream with a 503, it reconnects after the last event it handed
 * out, so the iterator sees every event once, in order.
 */
import { ParleyError, ParleyNetworkError } from './errors.js';
import type { EventBatch, EventReadRequest, EventTransport, InstancePin, ReadEventPage } from './events.js';
import {
  type Connection,
  INSTANCE_ID_HEADER,
  mergeHeaders,
  parseRetryAfter,
  type RetryPolicy,
  sleep,
} from './http.js';
import { serverSentEvents } from './sse.js';
import type { LoggedEvent } from './types.js';

/** How long a stream may stay silent before it counts as broken, ms: three of the server's 15 s heartbeats. */
export const STREAM_IDLE_TIMEOUT_MS = 45_000;

/** Statuses after which opening the stream again can succeed: a rate limit, a server that cannot serve right now. */
const RETRIED_STATUSES = new Set([429, 503]);

/** What {@link createStreamTransport} needs: the connection, the instance, and how to read a page of the backlog. */
export interface StreamTransportOptions {
  /** The client's connection (base URL, key, `fetch`, headers, retry policy). */
  connection: Connection;
  /**
   * The instance read, sent as `x-instance-id` on every connection once known; `readPage` shares it, and each
   * opened stream's `x-instance-id` and entries teach it when nothing else did
   * (docs/decisions/0091-event-reads-name-their-instance.md).
   */
  pin: InstancePin;
  /** Reads one page of `GET /v1/events`, for the backlog (the client's, with its retries, keeping to `pin`). */
  readPage: ReadEventPage;
  /** How long the stream may be silent before it is reopened, ms; default {@link STREAM_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number | undefined;
}

/** The message and status of parley's error envelope in `text`, when it is one. */
function envelopeOf(
  text: string,
): { status: number; message: string; retryAfter: number | undefined } | undefined {
  try {
    const parsed = JSON.parse(text) as {
      error?: { code?: unknown; message?: unknown; retryAfter?: unknown };
    };
    const error = parsed.error;
    if (typeof error?.code === 'number' && typeof error.message === 'string') {
      return {
        status: error.code,
        message: error.message,
        retryAfter: typeof error.retryAfter === 'number' ? error.retryAfter : undefined,
      };
    }
  } catch {
    // not parley's envelope
  }
  return undefined;
}

/** The backoff before reconnect number `attempt` (1-based), ms: as the client's retries (50-100 % jitter). */
function backoff(policy: RetryPolicy, attempt: number): number {
  const base = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** (attempt - 1));
  return Math.round(base * (0.5 + Math.random() / 2));
}

/** The stream broke in a way reconnecting can mend (and how long the server asked to wait, seconds). */
class Broken extends Error {
  constructor(
    readonly failure: unknown,
    readonly retryAfter?: number,
  ) {
    super('event stream interrupted');
  }
}

/**
 * How long a stream stays open before it counts as having worked though nothing came, ms: one ended by a server's
 * shutdown after that long (a rolling restart) starts the failure count again; one whose store failed ends at once.
 */
export const WORKED_MS = 1_000;

/**
 * The stream transport (see the module comment). Reconnects after a broken connection, a silent one, a 503 `end`
 * event, or a 429/503 answer to opening it, waiting as the client's {@link RetryPolicy} says (`Retry-After`
 * honoured); the count of failures starts again once a stream has shown it works: an event or a heartbeat came, or
 * it stayed open {@link WORKED_MS} (a stream that opens and at once ends with a 503 counts as a failure).
 * @throws (from `read`) ParleyError for an answer or `end` event reconnecting cannot mend (401, 403, 404, 400), or
 *   once `retries` reconnects in a row failed; ParleyNetworkError when the last of those got no answer; the signal's
 *   reason when the request's signal aborts.
 */
export function createStreamTransport(options: StreamTransportOptions): EventTransport {
  const { connection } = options;
  const idleTimeoutMs = options.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS;
  return {
    async *read(request: EventReadRequest): AsyncGenerator<EventBatch> {
      const types = request.types?.join(',');
      // The backlog, in pages, as polling reads it: `upToDate` says when it is read.
      let after = request.after;
      for (;;) {
        const page = await options.readPage({ after, limit: request.limit, types }, request.signal);
        const upToDate = page.events.length < request.limit;
        yield { events: page.events, next: page.next, upToDate };
        after = page.next;
        if (upToDate) break;
      }
      if (!request.follow) return;

      const policy = connection.retry;
      let failures = 0;
      for (;;) {
        request.signal?.throwIfAborted();
        const query = new URLSearchParams({ after: String(after) });
        if (types !== undefined) query.set('types', types);
        const path = `/v1/events/stream?${query}`;
        const info = { method: 'GET', path, attempts: failures + 1, idempotencyKey: undefined };
        const made: Record<string, string> = {
          accept: 'text/event-stream',
          authorization: `Bearer ${connection.apiKey}`,
        };
        // The instance the backlog (or an earlier stream) was read from: a reconnect never lands in another's log.
        const instance = options.pin.instance;
        if (instance !== undefined) made[INSTANCE_ID_HEADER] = instance;
        // What the stream needs replaces the connection's header of the same name, in whatever case it is spelt.
        const headers = mergeHeaders(connection.headers, made);
        // One controller per connection: the idle timer and the caller's signal both end it.
        const controller = new AbortController();
        const onAbort = () => controller.abort(request.signal?.reason);
        request.signal?.addEventListener('abort', onAbort, { once: true });
        let idle: ReturnType<typeof setTimeout> | undefined;
        /** When this connection's stream opened (Date.now() ms), once it did. */
        let openedAt: number | undefined;
        const touch = () => {
          clearTimeout(idle);
          idle = setTimeout(
            () => controller.abort(new Error(`no data for ${idleTimeoutMs} ms`)),
            idleTimeoutMs,
          );
        };
        try {
          touch();
          let response: Response;
          try {
            response = await connection.fetch(`${connection.baseUrl}${path}`, {
              method: 'GET',
              headers,
              signal: controller.signal,
            });
          } catch (error) {
            throw new Broken(error);
          }
          if (!response.ok) {
            const text = await response.text().catch(() => '');
            const envelope = envelopeOf(text);
            const failure = new ParleyError(
              response.status,
              envelope?.message ?? `HTTP ${response.status} (not a parley error answer)`,
              {
                ...info,
                retryAfter: parseRetryAfter(response.headers.get('retry-after')) ?? envelope?.retryAfter,
                requestId: response.headers.get('x-request-id') ?? undefined,
              },
            );
            if (!RETRIED_STATUSES.has(response.status)) throw failure;
            throw new Broken(failure, failure.retryAfter);
          }
          if (response.body === null) throw new Broken(new Error('the stream answered without a body'));
          options.pin.learn(response.headers.get(INSTANCE_ID_HEADER));
          // The failures count again from zero once the stream has shown it works (an event or a heartbeat), not at
          // its answer: a stream that opens and at once ends with `end` 503 keeps counting towards the limit.
          const working = () => {
            failures = 0;
          };
          openedAt = Date.now();
          for await (const message of serverSentEvents(response.body, touch, working)) {
            if (message.event === 'end') {
              const envelope = envelopeOf(message.data);
              const failure = new ParleyError(
                envelope?.status ?? 500,
                envelope?.message ?? message.data,
                info,
              );
              if (failure.status === 503) throw new Broken(failure, envelope?.retryAfter);
              throw failure;
            }
            let event: LoggedEvent;
            try {
              event = JSON.parse(message.data) as LoggedEvent;
            } catch (error) {
              throw new Broken(error);
            }
            options.pin.learn(event.instanceId);
            after = Math.max(after, event.sequence);
            working();
            // A pushed event: whether more are waiting is not known, so it never claims to be up to date.
            yield { events: [event], next: after, upToDate: false };
          }
          throw new Broken(new Error('the server closed the stream'));
        } catch (error) {
          request.signal?.throwIfAborted();
          if (error instanceof ParleyError) throw error;
          // Anything else broke the connection (reading the body failed: the server went away, the idle timer).
          const broken = error instanceof Broken ? error : new Broken(error);
          if (openedAt !== undefined && Date.now() - openedAt >= WORKED_MS) failures = 0;
          failures++;
          if (failures > policy.retries) {
            if (broken.failure instanceof ParleyError) throw broken.failure;
            throw new ParleyNetworkError({ ...info, attempts: failures }, broken.failure);
          }
          const asked = broken.retryAfter;
          if (
            asked !== undefined &&
            asked > policy.maxRetryAfterSeconds &&
            broken.failure instanceof ParleyError
          )
            throw broken.failure;
          await sleep(Math.max(backoff(policy, failures), (asked ?? 0) * 1000), request.signal);
        } finally {
          clearTimeout(idle);
          request.signal?.removeEventListener('abort', onAbort);
          controller.abort();
        }
      }
    },
  };
}
