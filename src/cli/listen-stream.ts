// The server-sent events parser of @parley/client, the one the client library reads this stream with: the server's
// build compiles that file beside src/ (scripts/build.js, docs/decisions/0033-listen-reads-the-stream.md).
import { serverSentEvents } from '../../packages/client/src/sse.ts';
import type { CliIo } from './commands/context.ts';
import { CliError } from './errors.ts';

/**
 * `parley listen` reading the event stream (docs/cli.md "listen", docs/decisions/0033-listen-reads-the-stream.md):
 * it opens `GET /v1/events/stream` as server-sent events (docs/api.md#event-stream) with any key that has the scope
 * `chat:webhook`, test or live, prints each entry, and when the connection is lost or the server ends the stream
 * with a 503 (shutting down, store unavailable) opens it again with `Last-Event-ID` set to the last sequence it
 * printed, so across reconnects nothing is printed twice and nothing is skipped. It changes nothing on the instance.
 * The body is read with @parley/client's parser (`serverSentEvents`, packages/client/src/sse.ts); the `id` of each
 * event is not used: the entry's own `sequence` is the position.
 */

/** One entry of the event log as the stream carries it (docs/api.md#event-log). */
export interface StreamEntry {
  type: string;
  event: unknown;
  instanceId: string;
  /** Position in the instance's log, from 1. */
  sequence: number;
  /** RFC 3339, UTC. */
  createdAt: string;
}

/** Options of {@link listenStream}. */
export interface StreamListenOptions {
  /** Base URL of the running parley, e.g. `http://localhost:8080`. */
  url: string;
  /** Any API key (`svc_test_…` or `svc_live_…`) with the scope `chat:webhook`. */
  key: string;
  /** The instance (UUID or linked phone); omitted: the one parley picks for the key. */
  from?: string | undefined;
  /** Print only events with a greater sequence (0: from the oldest kept). */
  after: number;
  /** Only these event types (names checked by parley: an unknown one is its 400); omitted: every type. */
  types?: readonly string[] | undefined;
  /** One JSON object per event (`{"payload": <entry>}`) instead of the human format. */
  json: boolean;
  /** Stop (exit 0) once this many events were printed; omitted: run until `stop`. */
  maxEvents?: number | undefined;
  /** Wait before the first reconnect, ms (doubled up to {@link StreamListenOptions.maxReconnectDelayMs}); default 250. */
  reconnectDelayMs?: number | undefined;
  /** Longest wait between reconnects, ms; default 5,000. */
  maxReconnectDelayMs?: number | undefined;
}

/** The statuses after which reading again later can succeed: a rate limit, a server that cannot serve right now. */
const RETRIED = new Set([429, 502, 503, 504]);

/** The message of parley's error envelope in `text`, or the first 200 characters of it when it is not one. */
function envelopeMessage(text: string): { status: number | undefined; message: string } {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed.error?.message === 'string') {
      return {
        status: typeof parsed.error.code === 'number' ? parsed.error.code : undefined,
        message: parsed.error.message,
      };
    }
  } catch {
    // not parley's envelope
  }
  return { status: undefined, message: text.slice(0, 200) };
}

/** One line for a person: the event's time, type, state and sequence, then the compact entry. */
export function streamLine(entry: StreamEntry): string {
  const state = (entry.event as { status?: unknown } | null)?.status;
  const time = /^\d{4}-\d{2}-\d{2}T(\d{2}:\d{2}:\d{2})/.exec(entry.createdAt)?.[1] ?? '--:--:--';
  return `${time}  ${entry.type}${typeof state === 'string' ? ` ${state}` : ''} #${entry.sequence}  event stream\n  ${JSON.stringify(entry)}`;
}

/** Why a stream stopped that is worth reconnecting after (the connection broke, or a 503 `end`). */
class Interrupted extends Error {}

/** The wait before reconnect number `attempt` (1-based), ms. */
function delayOf(options: StreamListenOptions, attempt: number): number {
  const min = options.reconnectDelayMs ?? 250;
  const max = options.maxReconnectDelayMs ?? 5000;
  return Math.min(max, min * 2 ** (attempt - 1));
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/**
 * Reads the event stream until `stop` resolves or `maxEvents` were printed, printing each entry to `io.out` and
 * status lines to `io.err` (`Ready: waiting for events` once the first stream is open; a line per reconnect).
 * @throws CliError when parley refuses the stream (`GET /v1/events/stream answered 403: API key lacks required scope
 *   chat:webhook`, 401, 404 `instance not found`, 400 for a bad `types`), when the server ends it for good (the key
 *   revoked, the instance removed: `the event stream ended: 404 instance not found`), or when parley cannot be
 *   reached for the first connection.
 */
export async function listenStream(
  options: StreamListenOptions,
  io: CliIo,
  stop: Promise<void>,
): Promise<void> {
  const base = options.url.replace(/\/$/, '');
  /**
   * The stream's URL for instance `from`. Without `--from`, the instance parley picked is named from the first answer
   * on (its `x-instance-id`; from a parley that does not send it, the first event printed): a reconnect resolving the
   * default again could pick another instance (one connected meanwhile), whose log the position (`--after`, or the
   * last event printed) does not belong to (docs/decisions/0091-event-reads-name-their-instance.md).
   */
  const urlFor = (from: string | undefined) => {
    const query = new URLSearchParams({ after: String(options.after) });
    if (from !== undefined) query.set('from', from);
    if (options.types !== undefined && options.types.length > 0) query.set('types', options.types.join(','));
    return `${base}/v1/events/stream?${query}`;
  };
  let from = options.from;
  const stopping = new AbortController();
  void stop.then(() => stopping.abort());

  let position = options.after;
  let printed = 0;
  let opened = false;
  let failures = 0;
  const done = () =>
    stopping.signal.aborted || (options.maxEvents !== undefined && printed >= options.maxEvents);

  while (!done()) {
    let response: Response;
    try {
      response = await fetch(urlFor(from), {
        headers: {
          authorization: `Bearer ${options.key}`,
          accept: 'text/event-stream',
          // The position wins over `after` (docs/api.md#event-stream): a reconnect resumes after the last event printed.
          ...(position > options.after ? { 'last-event-id': String(position) } : {}),
        },
        signal: stopping.signal,
      });
    } catch (error) {
      if (stopping.signal.aborted) return;
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? String(error);
      if (!opened) throw new CliError(`cannot reach parley at ${base} (${cause}); is it running? (--url)`);
      failures++;
      io.err(`parley listen: cannot reach parley (${cause}); trying again`);
      await pause(delayOf(options, failures), stopping.signal);
      continue;
    }
    if (!response.ok) {
      const { message } = envelopeMessage(await response.text());
      if (!RETRIED.has(response.status) || !opened) {
        throw new CliError(`GET /v1/events/stream answered ${response.status}: ${message}`);
      }
      failures++;
      io.err(`parley listen: GET /v1/events/stream answered ${response.status}: ${message}; trying again`);
      await pause(delayOf(options, failures), stopping.signal);
      continue;
    }
    if (response.body === null) throw new CliError('GET /v1/events/stream answered without a body');
    const streamed = response.headers.get('x-instance-id');
    if (streamed) from ??= streamed;
    if (!opened) io.err('Ready: waiting for events (Ctrl-C to stop)');
    else io.err(`parley listen: reconnected, resuming after #${position}`);
    opened = true;
    try {
      for await (const event of serverSentEvents(response.body)) {
        if (event.event === 'end') {
          const { status, message } = envelopeMessage(event.data);
          if (status !== undefined && RETRIED.has(status)) throw new Interrupted(`${status} ${message}`);
          throw new CliError(`the event stream ended: ${status ?? ''} ${message}`.replace('  ', ' '));
        }
        const entry = JSON.parse(event.data) as StreamEntry;
        io.out(options.json ? JSON.stringify({ payload: entry }) : streamLine(entry));
        position = entry.sequence;
        from ??= entry.instanceId;
        printed++;
        failures = 0;
        if (done()) break;
      }
      if (done()) break;
      throw new Interrupted('the connection closed');
    } catch (error) {
      if (stopping.signal.aborted) return;
      if (error instanceof CliError) throw error;
      failures++;
      const why = error instanceof Interrupted ? error.message : String(error);
      io.err(`parley listen: the stream was interrupted (${why}); reconnecting after #${position}`);
      await pause(delayOf(options, failures), stopping.signal);
    }
  }
  stopping.abort();
}
