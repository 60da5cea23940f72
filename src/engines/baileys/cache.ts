import type { CacheStore } from 'baileys';

/**
 * A Baileys `CacheStore` with a TTL and a size cap and no timers: entries expire when read after `ttlMs`, and the
 * least recently written entry goes when `max` is exceeded. Used for every cache the live engine hands Baileys
 * (signal key cache, message-retry counters, device lists, call offers, placeholder resends) so a session's
 * memory is bounded and nothing keeps the process alive or leaks across reconnects
 * (docs/decisions/0025-live-engine.md: bounded memory).
 */
export class BoundedCache implements CacheStore {
  readonly #entries = new Map<string, { value: unknown; expires: number }>();
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;

  /** @param ttlMs entry lifetime, ms. @param max most entries kept. @param now clock, epoch ms. */
  constructor(ttlMs: number, max: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#max = max;
    this.#now = now;
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
    this.#entries.set(key, { value, expires: this.#now() + this.#ttlMs });
    while (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
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

  /** Entries currently held (expired ones included until read). */
  get size(): number {
    return this.#entries.size;
  }
}
