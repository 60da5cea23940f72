import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { RateLimiterMemory } from 'rate-limiter-flexible';
import { loadWindow, pruneWindows, type StoredWindow, saveWindows } from '../store/rate-limit-windows.ts';
import type { Database } from '../store/schema.ts';

/** Default time between writes of the counted windows to the store, milliseconds. */
export const FLUSH_MS = 1000;
/** Expired windows are deleted from the store every this many flushes (once a minute by default). */
const PRUNE_EVERY = 60;

/** Marks a key as seeded (a settled promise is not needed on the hot path). */
const DONE: Promise<void> = Promise.resolve();

/**
 * The stored key of a window: its name and the counted key (`day:<orgId>:<env>`). The quota is not part of it, as
 * it is not of the Redis key: a plan change keeps the count spent on either store.
 */
function storedKey(name: string, _limiter: RateLimiterMemory, key: string): string {
  return `${name}:${key}`;
}

/** Options of {@link PersistedWindows}. */
export interface PersistedWindowsOptions {
  db: Kysely<Database>;
  logger: FastifyBaseLogger;
  /** Time between writes, ms (default {@link FLUSH_MS}). */
  flushMs?: number;
  /** Wall clock, epoch ms (default Date.now; rate-limiter-flexible counts in real time too). */
  now?: () => number;
}

/**
 * Keeps in-process rate-limit windows across restarts (docs/decisions/0019-rate-limits-and-plans.md, the embedded
 * default without Redis): the counting stays in `rate-limiter-flexible`'s memory limiter, and this class writes each
 * counted window's consumed requests and reset time to the store (`rate_limit_windows`) and seeds the limiter from it
 * after a boot.
 *
 * Why not a store round trip per request (a `RateLimiterStoreAbstract` adapter over the store): every
 * authenticated request would then wait for one more write, on PostgreSQL a network round trip and a hot row
 * per organization; Redis is the store for that, and stays the shared one when `REDIS_URL` is set. Here the hot
 * path does no I/O once a key is loaded (one read per key per process lifetime); the windows touched since the
 * last write are written every `flushMs` in one statement, and once more at a graceful stop, so a restart keeps
 * the exact count.
 *
 * The margin, documented: a crash (kill -9, power loss) forgets the requests counted since the last write, at
 * most `flushMs` (1 s) of traffic per organization and environment, and never more than the minute window lets
 * through in that second; a client can exceed its day quota by that much per crash, not more.
 *
 * A key whose load failed (the store could not be reached) is counted in memory alone and not written: a write
 * would put memory's count in place of the stored one. It is loaded again at its next request or write, whichever
 * comes first, the stored count then added to what memory counted meanwhile, and written from then on.
 *
 * Counts are per process: several processes sharing PostgreSQL without Redis each count on their own (the highest
 * count of a running window is stored, {@link saveWindows}). Set `REDIS_URL` to share limits
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
export class PersistedWindows {
  readonly #options: PersistedWindowsOptions;
  readonly #flushMs: number;
  readonly #now: () => number;
  /** Keys already seeded from the store, per limiter (a plan change makes a new limiter). */
  readonly #loaded = new WeakMap<RateLimiterMemory, Map<string, Promise<void>>>();
  /** The limiter and its key behind each stored key counted in this process. */
  readonly #latest = new Map<string, { name: string; limiter: RateLimiterMemory; key: string }>();
  /** Stored keys counted since the last write. */
  #dirty = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #flushes = 0;

  constructor(options: PersistedWindowsOptions) {
    this.#options = options;
    this.#flushMs = options.flushMs ?? FLUSH_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Starts writing every `flushMs`. Idempotent. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.flush(), this.#flushMs);
    this.#timer.unref();
  }

  /**
   * Makes sure `limiter` holds the stored count of `key` in window `name` before it counts there: returns
   * undefined when that is already so (the hot path), else a promise that resolves once the limiter was seeded
   * from the store (the stored count added to what memory holds). A store failure is logged and the window goes on
   * from what memory holds, unwritten until a later call loads it: rate limiting never fails a request.
   */
  prepare(name: string, limiter: RateLimiterMemory, key: string): Promise<void> | undefined {
    let keys = this.#loaded.get(limiter);
    if (!keys) {
      keys = new Map();
      this.#loaded.set(limiter, keys);
    }
    const known = keys.get(key);
    if (known) return known === DONE ? undefined : known;
    const loading = this.#seed(storedKey(name, limiter, key), limiter, key).then(
      () => {
        keys.set(key, DONE);
      },
      (error: unknown) => {
        keys.delete(key);
        this.#options.logger.warn({ err: error, window: name }, 'loading a rate-limit window failed');
      },
    );
    keys.set(key, loading);
    return loading;
  }

  /**
   * Records that `limiter` counted `key` in window `name`: it is written with the next flush once its load
   * succeeded ({@link prepare}).
   */
  counted(name: string, limiter: RateLimiterMemory, key: string): void {
    const stored = storedKey(name, limiter, key);
    this.#latest.set(stored, { name, limiter, key });
    this.#dirty.add(stored);
  }

  /** Writes the windows counted since the last write, in one statement. Never throws (failures are retried). */
  flush(): Promise<void> {
    this.#writing = this.#writing.then(() => this.#write());
    return this.#writing;
  }

  /** Stops the timer and writes what is left (graceful stop: a restart then keeps the exact count). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  /** Whether `key` of `limiter` was seeded from the store (only such keys are written). */
  #isLoaded(limiter: RateLimiterMemory, key: string): boolean {
    return this.#loaded.get(limiter)?.get(key) === DONE;
  }

  async #seed(stored: string, limiter: RateLimiterMemory, key: string): Promise<void> {
    const window = await loadWindow(this.#options.db, stored, this.#now());
    if (!window) return;
    const msLeft = window.resetAt - this.#now();
    if (window.consumed <= 0 || msLeft <= 0) return;
    // The stored count is added to what memory counted of the key while an earlier load failed, in one step of the
    // memory limiter (no request counted meanwhile is lost). It takes durations in seconds and keeps milliseconds:
    // a window memory did not hold ends when the stored one does.
    const res = await limiter.penalty(key, window.consumed, { customDuration: msLeft / 1000 });
    // Memory had opened a window of its own (a day from its first count after the failed load): end it when the
    // stored one ends. The count set is the one just added up: a request counted between the two steps, one
    // microtask apart, would be dropped from it.
    if (!res.isFirstInDuration) await limiter.set(key, res.consumedPoints, msLeft / 1000);
  }

  async #write(): Promise<void> {
    this.#flushes += 1;
    const prune = this.#flushes % PRUNE_EVERY === 0;
    if (this.#dirty.size === 0 && !prune) return;
    const dirty = this.#dirty;
    this.#dirty = new Set();
    // A key whose load failed holds only what memory counted since: it is loaded (and merged) now, else kept unwritten.
    for (const stored of dirty) {
      const entry = this.#latest.get(stored);
      if (!entry || this.#isLoaded(entry.limiter, entry.key)) continue;
      await this.prepare(entry.name, entry.limiter, entry.key);
      if (this.#isLoaded(entry.limiter, entry.key)) continue;
      dirty.delete(stored);
      this.#dirty.add(stored);
    }
    const now = this.#now();
    const windows: StoredWindow[] = [];
    for (const stored of dirty) {
      const entry = this.#latest.get(stored);
      const res = entry ? await entry.limiter.get(entry.key) : null;
      if (res) windows.push({ key: stored, consumed: res.consumedPoints, resetAt: now + res.msBeforeNext });
    }
    try {
      await saveWindows(this.#options.db, windows, now);
      if (prune) await pruneWindows(this.#options.db, now);
    } catch (error) {
      for (const stored of dirty) this.#dirty.add(stored);
      this.#options.logger.warn({ err: error }, 'writing rate-limit windows failed; retrying');
    }
  }
}
