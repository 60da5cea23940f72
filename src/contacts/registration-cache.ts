import { BoundedMap } from '../domain/bounded-map.ts';
import type { Clock } from '../domain/clock.ts';
import type { UserCheck } from '../domain/messages.ts';

/** Options of a {@link RegistrationCache}; durations in milliseconds. */
export interface RegistrationCacheOptions {
  /** How long a "registered" answer is kept (default 6 h: numbers rarely leave the platform). */
  positiveTtlMs?: number;
  /** How long a "not registered" answer is kept (default 5 min: a number may join at any time). */
  negativeTtlMs?: number;
  /**
   * Most entries kept over all instances, a whole number of at least 1; the least recently used go first (default
   * 50,000).
   */
  maxEntries?: number;
  clock?: Clock;
}

interface Entry {
  check: UserCheck;
  expiresAt: number;
}

/**
 * Caches the platform's registration answers per instance and phone number
 * (docs/decisions/0001-envelope-and-error-codes.md: sends check the recipient's registration first, cached), so a
 * burst of sends to one number costs one platform lookup. Bounded: a least-recently-used map of at most `maxEntries`
 * entries. Per instance because each sandbox instance has its own simulated world (docs/decisions/0004-sandbox.md);
 * the sandbox helper that redefines a user invalidates its entry.
 */
export class RegistrationCache {
  readonly #entries: BoundedMap<string, Entry>;
  readonly #positiveTtlMs: number;
  readonly #negativeTtlMs: number;
  readonly #clock: Clock;

  /** @throws RangeError when `options.maxEntries` is not a whole number of at least 1. */
  constructor(options: RegistrationCacheOptions = {}) {
    this.#entries = new BoundedMap(options.maxEntries ?? 50_000);
    this.#positiveTtlMs = options.positiveTtlMs ?? 6 * 60 * 60 * 1000;
    this.#negativeTtlMs = options.negativeTtlMs ?? 5 * 60 * 1000;
    this.#clock = options.clock ?? Date.now;
  }

  /**
   * Registration of `phones` for `instanceId`, one entry per number in order (docs/api.md#contacts). Numbers
   * not cached (or expired) are looked up with one call of `lookup`, whose answers are cached.
   * @throws whatever `lookup` throws (nothing is cached then).
   */
  async check(
    instanceId: string,
    phones: readonly string[],
    lookup: (phones: string[]) => Promise<UserCheck[]>,
  ): Promise<UserCheck[]> {
    const now = this.#clock();
    const found = new Map<string, UserCheck>();
    const missing: string[] = [];
    for (const phone of new Set(phones)) {
      const key = `${instanceId}:${phone}`;
      const entry = this.#entries.get(key);
      if (entry && entry.expiresAt > now) {
        this.#entries.use(key);
        found.set(phone, entry.check);
      } else {
        if (entry) this.#entries.delete(key);
        missing.push(phone);
      }
    }
    if (missing.length > 0) {
      const answers = await lookup(missing);
      for (const check of answers) {
        found.set(check.query, check);
        this.#put(`${instanceId}:${check.query}`, check, now);
      }
    }
    return phones.map(
      (phone) => found.get(phone) ?? { query: phone, isInPlatform: false, jid: null, verifiedName: '' },
    );
  }

  /** Forgets `phone` of `instanceId`, or every number of the instance when `phone` is omitted. */
  invalidate(instanceId: string, phone?: string): void {
    if (phone !== undefined) {
      this.#entries.delete(`${instanceId}:${phone}`);
      return;
    }
    const prefix = `${instanceId}:`;
    for (const key of this.#entries.keys()) if (key.startsWith(prefix)) this.#entries.delete(key);
  }

  /** Number of entries held (metrics, tests). */
  get size(): number {
    return this.#entries.size;
  }

  #put(key: string, check: UserCheck, now: number): void {
    const ttl = check.isInPlatform ? this.#positiveTtlMs : this.#negativeTtlMs;
    this.#entries.set(key, { check, expiresAt: now + ttl });
  }
}
