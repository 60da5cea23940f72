import type { FastifyBaseLogger } from 'fastify';
import type { EngineEvent } from '../domain/messages.ts';
import {
  type RecordRetryOptions,
  type RecordRetryPolicy,
  recordWithRetry,
  releasedError,
} from './record-retry.ts';

/** A recording waiting in the line: what it records, and how its caller learns the outcome. */
interface Waiting {
  /** Its place in the session's emission order. */
  ticket: number;
  record: () => Promise<void>;
  event: EngineEvent;
  /** The try made before it joined the line, and its error; undefined when it joined without one. */
  failed: { attempts: number; error: unknown } | undefined;
  /** Aborted when the item may no longer be written (it writes engine state and the session was released). */
  released: AbortSignal | undefined;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * One session's recordings kept in the order they were emitted across store failures
 * (docs/decisions/0011-store-faults.md). The session's callers do not wait for each other: a send records its
 * `message` event while the platform's events are recorded through the engine's own queue, and the recorder keeps
 * the order in which they reach it (src/events/recorder.ts). A recording that fails would retry on its own backoff,
 * and one that began failing later would be tried again sooner and overtake it: a read receipt applied before the
 * message it names finds no row and is lost, the message then stored as `sent` for good.
 *
 * While nothing waits, each recording is tried at once, as before (the recorder still batches those that arrive
 * together). One that fails joins the line, in emission order, and from then every later recording of the session
 * joins it too, without a try of its own, until the line is empty. The line tries one recording at a time, oldest
 * first, with the retry of every recording ({@link recordWithRetry}, its limits and waits going on from the failed
 * try), and the next only once that one was recorded or given up; its head waits for the first tries of older
 * recordings still running, which may join the line ahead of it. A recording handed to the recorder before an
 * older one failed with the store unreachable is failed untried by the recorder (src/events/recorder.ts), so it
 * joins the line behind it too; one handed over before an older one failed otherwise (an unknown error) may still be
 * applied before it.
 */
export class RecordLine {
  readonly #policy: RecordRetryPolicy;
  readonly #logger: FastifyBaseLogger;
  /** The session's shutdown signal, when it has one. */
  readonly #signal: AbortSignal | undefined;
  /** The next recording's place in emission order. */
  #next = 0;
  /** Tickets of the first tries running now. */
  readonly #trying = new Set<number>();
  /** Recordings waiting, oldest ticket first. */
  readonly #waiting: Waiting[] = [];
  /** Whether the line's loop runs. */
  #running = false;

  /**
   * @param policy the retry of every recording (src/sessions/record-retry.ts).
   * @param logger where the retries' log lines go.
   * @param options the session's `signal` (shutdown): a recording waiting then makes one last try and fails.
   */
  constructor(policy: RecordRetryPolicy, logger: FastifyBaseLogger, options: RecordRetryOptions = {}) {
    this.#policy = policy;
    this.#logger = logger;
    this.#signal = options.signal;
  }

  /**
   * Records through `record` (`event` names it in the log lines) after every recording emitted before it; resolves
   * once recorded. With `released` (an item that writes engine state, which a released session's new owner writes
   * from then on, docs/decisions/0008-leases-and-fencing.md), no try is made once it aborted.
   * @throws as {@link recordWithRetry}: a permanent store error, an unknown one after the policy's tries, the last
   *   error once the signal aborted, `releasedError` once `released` aborted.
   */
  async record(record: () => Promise<void>, event: EngineEvent, released?: AbortSignal): Promise<void> {
    if (released?.aborted) throw releasedError(released);
    const ticket = this.#next++;
    if (this.#waiting.length > 0) return this.#join({ ticket, record, event, failed: undefined, released });
    this.#trying.add(ticket);
    let joined: Promise<void> | undefined;
    try {
      await record();
    } catch (error) {
      // In the line before its try counts as ended, so a younger head waiting for it does not start first.
      joined = this.#join({ ticket, record, event, failed: { attempts: 1, error }, released });
    }
    this.#trying.delete(ticket);
    // The head may have waited for this try.
    this.#start();
    return joined;
  }

  /** Puts a recording in the line at its place in emission order; settles when the line recorded it or gave up. */
  #join(entry: Omit<Waiting, 'resolve' | 'reject'>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const { ticket, record, event, failed, released } = entry;
      const waiting: Waiting = { ticket, record, event, failed, released, resolve, reject };
      const after = this.#waiting.findIndex((other) => other.ticket > entry.ticket);
      if (after === -1) this.#waiting.push(waiting);
      else this.#waiting.splice(after, 0, waiting);
      this.#start();
    });
  }

  /** Starts the line's loop unless it runs, or its head waits for an older first try. */
  #start(): void {
    if (this.#running) return;
    const head = this.#waiting[0];
    if (head === undefined || this.#olderTrying(head.ticket)) return;
    this.#running = true;
    void this.#drain();
  }

  /** Whether a first try older than `ticket` still runs (it may join the line ahead). */
  #olderTrying(ticket: number): boolean {
    for (const trying of this.#trying) if (trying < ticket) return true;
    return false;
  }

  /** Records the waiting recordings one at a time, oldest first; stops when the head must wait for an older try. */
  async #drain(): Promise<void> {
    for (;;) {
      const head = this.#waiting[0];
      if (head === undefined || this.#olderTrying(head.ticket)) break;
      try {
        const options: RecordRetryOptions = { signal: this.#signal };
        if (head.failed !== undefined) options.failed = head.failed;
        if (head.released !== undefined) options.released = head.released;
        await recordWithRetry({ emit: head.record, logger: this.#logger }, head.event, this.#policy, options);
        head.resolve();
      } catch (error) {
        head.reject(error);
      }
      // Nothing older joins while the head is tried (its older first tries had ended, later recordings join behind).
      this.#waiting.splice(this.#waiting.indexOf(head), 1);
    }
    this.#running = false;
  }
}
