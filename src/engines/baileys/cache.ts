import type { CacheStore } from 'baileys';

/**
 * A Baileys `CacheStore` with a TTL and a size cap and no timers: entries expire `ttlMs` after they were written
 * (an expired entry is dropped when read, and the expired ones written first are dropped as newer ones are written:
 * every entry has the same lifetime, so they expire in the order written), and the least recently written entry
 * goes when `max` is exceeded. Used for every cache the live engine hands Baileys (signal key cache, message-retry
 * counters, device lists, call offers, placeholder resends) so a session's memory is bounded and nothing keeps the
 * process alive or leaks across reconnects (docs/decisions/0025-live-engine.md: bounded memory).
 */
export class BoundedCache implements CacheStore {
  readonly #entries = new Map<string, { value: unknown; expires: number }>();
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;
  readonly #keeps: (key: string) => boolean;

  /**
   * @param ttlMs entry lifetime, ms. @param max most entries kept. @param now clock, epoch ms.
   * @param keeps whether a key is kept at all (default every key): a write of a key it refuses only forgets what
   *   was kept under it, so a read goes to the store.
   */
  constructor(
    ttlMs: number,
    max: number,
    now: () => number = Date.now,
    keeps: (key: string) => boolean = () => true,
  ) {
    this.#ttlMs = ttlMs;
    this.#max = max;
    this.#now = now;
    this.#keeps = keeps;
  }

  get<T>(key: string): T | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expires <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value as T;
  }

  set<T>(key: string, value: T): void {
    this.#entries.delete(key);
    if (!this.#keeps(key)) return;
    const now = this.#now();
    this.#entries.set(key, { value, expires: now + this.#ttlMs });
    // Oldest first: drop what outlived its TTL, then what exceeds the cap.
    for (const [oldest, entry] of this.#entries) {
      if (entry.expires > now && this.#entries.size <= this.#max) break;
      this.#entries.delete(oldest);
    }
  }

  del(key: string): void {
    this.#entries.delete(key);
  }

  flushAll(): void {
    this.#entries.clear();
  }

  close(): void {
    this.#entries.clear();
  }

  /** Entries currently held (expired ones included until read or swept by a later write). */
  get size(): number {
    return this.#entries.size;
  }
}
