import type { FastifyBaseLogger } from 'fastify';
import type { AuthStateStore } from '../engines/engine.ts';
import {
  isPermanentStoreError,
  isTransientStoreError,
  pause,
  type RecordRetryPolicy,
  recordRetryDelayMs,
  releasedError,
} from './record-retry.ts';

/**
 * An {@link AuthStateStore} whose reads and writes wait out a store that cannot be reached (docs/decisions/
 * 0011-store-faults.md): an engine decrypting an inbound message reads and writes its Signal keys here before it
 * acknowledges the message to the platform, so while the store is down the message stays unacknowledged (the
 * platform keeps it) instead of failing to decrypt. Transient errors ({@link isTransientStoreError}) are retried
 * with the delays of {@link recordRetryDelayMs}, without limit until `signal` aborts (shutdown: one last try) or
 * `released` does (the session was released, its instance's lease lost or handed over: no further try,
 * docs/decisions/0008-leases-and-fencing.md, so a write waiting out the store cannot land after the new owner wrote
 * newer keys). A read ({@link get}, {@link list}) that meets an unknown error (neither transient nor
 * {@link isPermanentStoreError}) is tried `policy.unknownAttempts` times in all, as a recording is
 * (src/sessions/record-retry.ts): an engine reads here what an incoming event needs after the platform was told of
 * it (a poll's secret to decrypt a vote), so one odd failure must not lose the event. A permanent error, and an
 * unknown one of a write, is raised at once. The first failure of an operation is logged at warn.
 * @throws `releasedError(released)` (record-retry.ts) for an operation started once `released` aborted, one
 *   stopped by it while it retried, whatever its last try met, and one whose try answered only after it aborted: a
 *   read then hands nothing to a session that was released meanwhile (its connect would open a socket on what it
 *   read, docs/decisions/0008-leases-and-fencing.md); a write that landed then is one the session began before.
 */
export class RetryingAuthStateStore implements AuthStateStore {
  readonly #inner: AuthStateStore;
  readonly #policy: RecordRetryPolicy;
  readonly #logger: FastifyBaseLogger;
  readonly #signal: AbortSignal;
  readonly #released: AbortSignal | undefined;

  constructor(
    inner: AuthStateStore,
    policy: RecordRetryPolicy,
    logger: FastifyBaseLogger,
    signal: AbortSignal,
    released?: AbortSignal,
  ) {
    this.#inner = inner;
    this.#policy = policy;
    this.#logger = logger;
    this.#signal = signal;
    this.#released = released;
  }

  get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    return this.#retry('get', () => this.#inner.get(category, ids), true);
  }

  set(entries: readonly { category: string; id: string; value: string | null }[]): Promise<void> {
    return this.#retry('set', () => this.#inner.set(entries));
  }

  list(category: string): Promise<Map<string, string>> {
    return this.#retry('list', () => this.#inner.list(category), true);
  }

  clear(): Promise<void> {
    return this.#retry('clear', () => this.#inner.clear());
  }

  /**
   * Runs `work` with the retry above; `read`: an unknown error is tried `policy.unknownAttempts` times in all.
   */
  async #retry<T>(operation: string, work: () => Promise<T>, read = false): Promise<T> {
    if (this.#released?.aborted) throw releasedError(this.#released);
    for (let attempt = 1; ; attempt++) {
      let result: T;
      try {
        result = await work();
      } catch (error) {
        // Released: whatever this try met, the session writes no more (a deletion's foreign key violation included).
        if (this.#released?.aborted) throw releasedError(this.#released);
        if (this.#signal.aborted || !this.#retries(error, attempt, read)) throw error;
        const delayMs = recordRetryDelayMs(attempt, this.#policy);
        if (attempt === 1 || attempt % 10 === 0)
          this.#logger.warn(
            { err: error, operation, attempt, delayMs },
            'the platform credentials store failed; retrying',
          );
        await pause(delayMs, this.#signal, this.#released);
        if (this.#released?.aborted) throw releasedError(this.#released);
        continue;
      }
      if (this.#released?.aborted) throw releasedError(this.#released);
      return result;
    }
  }

  /** Whether try `attempt` (from 1), which failed with `error`, is followed by another. */
  #retries(error: unknown, attempt: number, read: boolean): boolean {
    if (isTransientStoreError(error)) return true;
    return read && !isPermanentStoreError(error) && attempt < this.#policy.unknownAttempts;
  }
}
