import { DomainError } from '../domain/errors.ts';
import type { EventType, Instance } from '../domain/instance.ts';
import type { EventCommits } from '../events/event-commits.ts';
import type { EventLogPage, EventLogRequest, EventLogService, LoggedEvent } from './events.ts';

/** Most events one read of a stream takes from the event log (one page; what a slow consumer can hold up). */
export const STREAM_PAGE_SIZE = 100;

/**
 * How often an idle stream reads the event log and checks that it may go on anyway, ms: events committed by another
 * node reach it within this, and so does a revoked key or a removed instance (docs/decisions/0031-event-stream.md).
 */
export const STREAM_POLL_MS = 1000;

/**
 * How the 409 of a stream whose position is past the log's end names the position: `position 12 is past the
 * instance's last event (sequence 3): resume from 3 or less, …` (docs/decisions/0031-event-stream.md "How it ends").
 * One short word, as a WebSocket close reason is cut at 123 bytes (the SSE `end` event carries the whole message).
 */
export const STREAM_POSITION = 'position';

/**
 * The reads of the event log that the streams of one node ask for in one turn of the event loop
 * (docs/decisions/0118-stream-reads-shared-in-a-turn.md): those of one instance, at one position, for the same types
 * and page size, are made once, at the turn's end, and each asker gets that read's page. A commit wakes every stream
 * of its instance at once, and live streams stand at the same position: a few hundred consumers of an instance read
 * one page a commit instead of taking a pool connection each, ahead of every other request of the node. A read starts
 * after every ask it answers, so its snapshot is taken after each asker's wake-up and holds what woke it.
 */
export class SharedPageReads {
  readonly #log: EventLogService;
  /** Reads asked in this turn and not started yet, by what they read. */
  readonly #asked = new Map<string, Promise<EventLogPage>>();

  constructor(log: EventLogService) {
    this.#log = log;
  }

  /**
   * The page `request` asks of `instance`'s log, read at the end of this turn with the other asks of the same page.
   * @throws as `EventLogService.page`, to every asker of the read.
   */
  page(instance: Instance, request: EventLogRequest): Promise<EventLogPage> {
    const types = request.types === undefined ? [] : [...request.types].sort();
    const key = JSON.stringify([instance.id, request.after, request.limit, types, request.field ?? '']);
    let read = this.#asked.get(key);
    if (read === undefined) {
      read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        // Started: an ask from now on is answered by a read of its own, whose snapshot follows it.
        this.#asked.delete(key);
        return this.#log.page(instance, request);
      });
      this.#asked.set(key, read);
    }
    return read;
  }
}

/** Where a stream starts and what it carries. */
export interface EventTailOptions {
  /** Only events with a greater sequence (≥ 0). */
  after: number;
  /** Only events of these types; omitted or empty: every type. */
  types?: readonly EventType[];
  /**
   * Checks that the stream may go on (the caller's key still valid and allowed, the instance still addressable),
   * run at most once per {@link STREAM_POLL_MS} before a read of the log; it throws the `DomainError` the stream
   * ends with (`unauthenticated`, `forbidden`, `not_found`).
   */
  recheck: () => Promise<void>;
}

/**
 * One open stream of an instance's events (docs/decisions/0031-event-stream.md): a tail of the event log. It reads
 * the log from the last sequence it read, in pages, whenever it is woken (this node committed events of the
 * instance) and at least every {@link STREAM_POLL_MS} while idle (events committed by another node), so what it
 * hands out is the log itself: in sequence order, with no gap and no duplicate between the backlog and the events
 * that follow. It reads the next page only when asked ({@link next}), so a consumer that has not taken a page holds
 * one page at most. {@link close} it when done; it unsubscribes from the wake-ups.
 */
export class EventTail {
  readonly #log: SharedPageReads;
  readonly #instance: Instance;
  readonly #types: readonly EventType[] | undefined;
  readonly #recheck: () => Promise<void>;
  readonly #pollMs: number;
  readonly #pageSize: number;
  readonly #unsubscribe: () => void;
  #cursor: number;
  #checkedAt = performance.now();
  #woken = false;
  #closed = false;
  #wake: (() => void) | undefined;

  constructor(deps: {
    /** The node's shared reads of the log (docs/decisions/0118-stream-reads-shared-in-a-turn.md). */
    log: SharedPageReads;
    commits: EventCommits;
    instance: Instance;
    options: EventTailOptions;
    pollMs: number;
    pageSize: number;
  }) {
    this.#log = deps.log;
    this.#instance = deps.instance;
    this.#types = deps.options.types;
    this.#recheck = deps.options.recheck;
    this.#pollMs = deps.pollMs;
    this.#pageSize = deps.pageSize;
    this.#cursor = deps.options.after;
    this.#unsubscribe = deps.commits.subscribe(deps.instance.id, () => {
      this.#woken = true;
      this.#wake?.();
    });
  }

  /** How far the log has been read: the `after` of the next read (a sequence; events of other types skipped). */
  get position(): number {
    return this.#cursor;
  }

  /**
   * The next events after {@link position}, oldest first (1 to a page of them), waiting while there are none; null
   * once the tail is closed.
   * @throws DomainError from the recheck (the stream must end: `unauthenticated`, `forbidden`, `not_found`) or from
   *   the store (`store_unavailable`); `not_found` when the instance was deleted since the last read; `conflict`
   *   ({@link STREAM_POSITION}) when the log's last sequence fell below {@link position} while the instance, key
   *   and scope still pass the recheck (the store was restored from an older backup or failed over to a replica that
   *   had not seen the last commits: docs/decisions/0073-event-log-positions-past-the-head.md).
   */
  async next(): Promise<LoggedEvent[] | null> {
    for (;;) {
      if (this.#closed) return null;
      if (performance.now() - this.#checkedAt >= this.#pollMs) {
        await this.#recheck();
        this.#checkedAt = performance.now();
        if (this.#closed) return null;
      }
      // A wake-up arriving while the page is read means the read may have missed its events: read again at once.
      this.#woken = false;
      const page = await this.#read();
      this.#cursor = page.next;
      if (this.#closed) return null;
      if (page.events.length > 0) return page.events;
      if (!this.#woken) await this.#idle();
    }
  }

  /**
   * Reads the page after {@link position}. A position past the log's end cannot come from reading on (the position
   * only moves to sequences read): the instance was deleted (its last sequence went with its rows), the store lost
   * commits, or the key or instance no longer pass. The recheck runs at once then, not after the poll interval, so
   * the stream ends with the reason it gives (`not_found` for a deleted instance, as the poll would have found a
   * moment later) before it ends with the conflict.
   */
  async #read(): Promise<EventLogPage> {
    try {
      return await this.#log.page(this.#instance, {
        after: this.#cursor,
        limit: this.#pageSize,
        field: STREAM_POSITION,
        ...(this.#types === undefined ? {} : { types: this.#types }),
      });
    } catch (error) {
      if (error instanceof DomainError && error.code === 'conflict' && !this.#closed) {
        await this.#recheck();
        this.#checkedAt = performance.now();
      }
      throw error;
    }
  }

  /** Ends the tail: a pending {@link next} resolves null; wake-ups stop. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    this.#wake?.();
  }

  /** Waits for a wake-up, the poll interval or {@link close}, whichever comes first. */
  async #idle(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.#wake = resolve;
      timer = setTimeout(resolve, this.#pollMs);
    });
    clearTimeout(timer);
    this.#wake = undefined;
  }
}

/**
 * Live streams of an instance's events (docs/decisions/0031-event-stream.md, `GET /v1/events/stream`): tails of
 * the event log (docs/decisions/0030-event-log.md) woken by this node's commits ({@link EventCommits}) and read on a
 * timer for the other nodes' ones. The tails of one service share the reads of a turn ({@link SharedPageReads},
 * docs/decisions/0118-stream-reads-shared-in-a-turn.md).
 */
export class EventStreamService {
  readonly #log: SharedPageReads;
  readonly #commits: EventCommits;
  readonly #pollMs: number;
  readonly #pageSize: number;

  constructor(deps: {
    eventLog: EventLogService;
    commits: EventCommits;
    pollMs?: number;
    pageSize?: number;
  }) {
    this.#log = new SharedPageReads(deps.eventLog);
    this.#commits = deps.commits;
    this.#pollMs = deps.pollMs ?? STREAM_POLL_MS;
    this.#pageSize = deps.pageSize ?? STREAM_PAGE_SIZE;
  }

  /**
   * Opens a tail of `instance`'s events after `options.after`, of `options.types` only when it names some. The
   * caller was authenticated and the instance resolved just before (the recheck runs again after
   * {@link STREAM_POLL_MS}).
   */
  open(instance: Instance, options: EventTailOptions): EventTail {
    return new EventTail({
      log: this.#log,
      commits: this.#commits,
      instance,
      options,
      pollMs: this.#pollMs,
      pageSize: this.#pageSize,
    });
  }
}
