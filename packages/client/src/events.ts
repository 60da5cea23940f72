/**
 * The event log as an async iterator (docs/api.md "Event log", docs/decisions/0030-event-log.md): every event of an
 * instance in `sequence` order, from a position the caller keeps. Events come from an {@link EventTransport}: the
 * polling one reads `GET /v1/events` page by page through the backlog, then asks again every `intervalMs`; the
 * stream one (src/stream.ts, docs/decisions/0034-client-stream-transport.md) reads the backlog the same way, then
 * takes each event `GET /v1/events/stream` pushes. Both plug into the same iterator (docs/decisions/0032-client-library.md).
 */
import { sleep } from './http.js';
import type { EventType, LoggedEvent } from './types.js';

/** One read of the log: events in `sequence` order, and the position to read from next. */
export interface EventBatch {
  /** The events, oldest first (possibly none). */
  events: LoggedEvent[];
  /**
   * Where the next read starts (`after`): the log's `next`, never less than the last event's sequence. With a
   * `types` filter it can be past the last event returned: the events of other types were stepped over.
   */
  next: number;
  /** True when the read reached the end of the log: nothing more is waiting right now. */
  upToDate: boolean;
}

/** Where an {@link EventTransport} starts, and what it reads. */
export interface EventReadRequest {
  /** Only events with a greater `sequence` (0: from the oldest kept). */
  after: number;
  /** Only these types; undefined: every type. */
  types: EventType[] | undefined;
  /** Largest batch, 1 to 1,000 (the log's page size). */
  limit: number;
  /** True: go on after the backlog, waiting for new events; false: stop at the end of the backlog. */
  follow: boolean;
  /** Aborts the read: the transport stops, rejecting with the signal's reason or returning. */
  signal: AbortSignal | undefined;
}

/**
 * A source of event batches. It yields batches in order, each starting where the previous one's `next` ended, and
 * returns once a batch is `upToDate` when `follow` is false. The polling transport reads `GET /v1/events`; the stream
 * one first catches up the same way, then yields each event pushed to it as a batch of one.
 */
export interface EventTransport {
  /**
   * The batches from `request.after` on.
   * @throws ParleyError / ParleyNetworkError when a read fails after its retries.
   */
  read(request: EventReadRequest): AsyncIterable<EventBatch>;
}

/**
 * The instance one `client.events()` stream reads (docs/decisions/0091-event-reads-name-their-instance.md): the one
 * named (the `instance` option, else the client's), or, when none was named, the first one parley names, in the
 * `x-instance-id` of its first answer (or, from a server that does not send it, the `instanceId` of the first entry).
 * Every later page, poll and reconnect sends it as `x-instance-id`, so they keep to that instance's log though another
 * instance becomes parley's default meanwhile (docs/decisions/0002-instance-resolution.md): the cursor is a `sequence`
 * of that log, meaningless in another's.
 */
export interface InstancePin {
  /** The instance to send as `x-instance-id` (UUID or phone); undefined while none was named nor learnt yet. */
  readonly instance: string | undefined;
  /** Keeps `instance`, an instance parley named, when none is kept yet; null, undefined and `''` are ignored. */
  learn(instance: string | null | undefined): void;
}

/** A new {@link InstancePin}, holding `named` from the start when it is given. */
export function pinInstance(named: string | undefined): InstancePin {
  let instance = named;
  return {
    get instance() {
      return instance;
    },
    learn(seen) {
      if (instance === undefined && seen !== null && seen !== undefined && seen !== '') instance = seen;
    },
  };
}

/** One page of `GET /v1/events`, as {@link createPollingTransport} needs it read. */
export type ReadEventPage = (
  query: { after: number; limit: number; types: string | undefined },
  signal: AbortSignal | undefined,
) => Promise<{ events: LoggedEvent[]; next: number }>;

/**
 * The polling transport: reads pages of `GET /v1/events` back to back while they come back full, and when a page is
 * shorter than `limit` (the log is read to its end, docs/decisions/0030-event-log.md) waits `intervalMs` before asking
 * again with `after = next`.
 * @param readPage reads one page (the client's `GET /v1/events`, with its retries).
 * @param intervalMs wait between polls once up to date, ms.
 */
export function createPollingTransport(readPage: ReadEventPage, intervalMs: number): EventTransport {
  return {
    async *read(request) {
      let after = request.after;
      const types = request.types?.join(',');
      for (;;) {
        const page = await readPage({ after, limit: request.limit, types }, request.signal);
        const upToDate = page.events.length < request.limit;
        yield { events: page.events, next: page.next, upToDate };
        after = page.next;
        if (!upToDate) continue;
        if (!request.follow) return;
        await sleep(intervalMs, request.signal);
      }
    },
  };
}

/** The options of `client.events()`. */
export interface EventsOptions {
  /** Start after this sequence (a `cursor` kept from an earlier run); default 0: from the oldest event kept. */
  after?: number | undefined;
  /** Only these event types; default: every type. */
  types?: EventType[] | undefined;
  /** Events per read, 1 to 1,000; default 100. */
  limit?: number | undefined;
  /** Keep waiting for new events after the backlog (default true); false: end once up to date. */
  follow?: boolean | undefined;
  /** Wait between polls once up to date, ms; default 1,000. */
  intervalMs?: number | undefined;
  /** Ends the iteration (quietly: the loop just stops) when it aborts, even during a wait or a read. */
  signal?: AbortSignal | undefined;
  /**
   * The instance whose log is read (UUID or phone); default: the client's. With neither, the instance parley picks
   * for the first read, kept for every later one (see {@link InstancePin}).
   */
  instance?: string | undefined;
  /**
   * Where events come from once the backlog is read (docs/decisions/0034-client-stream-transport.md): `'stream'`
   * (the default) pushes them over `GET /v1/events/stream` as server-sent events, reconnecting after the last event
   * handed out; `'poll'` asks `GET /v1/events` again every `intervalMs`; or any {@link EventTransport}. Both built-in
   * transports read the backlog in pages of `limit`, so with `follow: false` they make the same requests, and both
   * keep to one instance ({@link InstancePin}); a transport of your own reads whatever instance it addresses.
   */
  transport?: 'stream' | 'poll' | EventTransport | undefined;
  /** `'stream'`: how long the stream may stay silent before it is reopened, ms; default 45,000 (3 heartbeats). */
  idleTimeoutMs?: number | undefined;
}

/**
 * The events of the log in `sequence` order, as an async iterable, and the position to resume from.
 * `cursor` is the `after` to pass next time: the sequence of the last event handed out, or a batch's `next` once all
 * its events were handed out (so events the `types` filter left out are not read again). Store it after processing
 * an event to resume exactly there.
 */
export interface EventStream extends AsyncIterable<LoggedEvent> {
  /** The `after` to resume from (see {@link EventStream}). */
  readonly cursor: number;
}

/**
 * The iterator behind `client.events()`: hands out the events of `transport`'s batches one by one, moving
 * {@link EventStream.cursor}. An abort of `signal` ends the iteration without an error; a failed read rejects the
 * pending `next()` (the loop throws), after which the stream is done: start another from its `cursor`.
 */
export function eventStream(transport: EventTransport, request: EventReadRequest): EventStream {
  let cursor = request.after;
  return {
    get cursor() {
      return cursor;
    },
    async *[Symbol.asyncIterator]() {
      try {
        for await (const batch of transport.read({ ...request, after: cursor })) {
          for (const event of batch.events) {
            cursor = Math.max(cursor, event.sequence);
            yield event;
          }
          cursor = Math.max(cursor, batch.next);
        }
      } catch (error) {
        if (request.signal?.aborted) return;
        throw error;
      }
    },
  };
}
