import type { AuthStateStore } from '../engine.ts';
import { BoundedCache } from './cache.ts';

/** Most ids (over every category) an {@link AuthStoreMemo} remembers as absent; the oldest is forgotten first. */
export const ABSENT_IDS_MAX = 2_000;

/** Most values an {@link AuthStoreMemo} keeps of its remembered categories; the oldest is forgotten first. */
export const REMEMBERED_VALUES_MAX = 500;

/**
 * One live session's view of its instance's auth store that does not ask the store twice for what it already knows
 * (docs/decisions/0025-live-engine.md):
 * - ids a read did not find are answered as absent until a write names them. Baileys 7 asks for the sender's
 *   device list with every message it receives (`migrateSession`), which for most senders is stored nowhere, and
 *   Baileys' own key cache (`makeCacheableSignalKeyStore`) keeps only what it found;
 * - the values of `remembered` categories (the contact book) are kept once read or written, since Baileys reports
 *   the sender's push name with every message and the book compares it with the stored contact.
 *
 * It is right while every read and write of the instance's auth entries goes through it: the session that holds the
 * instance (one per instance, docs/decisions/0008-leases-and-fencing.md) makes one memo and gives it to everything
 * it runs; a session released by its node is forgotten with its memo. What a read returns is only remembered when
 * no write started or ran while it was under way, so a read that raced a write never hides it. A failed write
 * forgets what it named; {@link clear} forgets everything.
 */
export class AuthStoreMemo implements AuthStateStore {
  readonly #store: AuthStateStore;
  readonly #remembered: ReadonlySet<string>;
  /** `category \0 id` of entries known to be absent (no expiry: only a write or the bound forgets one). */
  readonly #absent = new BoundedCache(Number.POSITIVE_INFINITY, ABSENT_IDS_MAX);
  /** `category \0 id` → stored value of remembered categories (no expiry, as above). */
  readonly #values = new BoundedCache(Number.POSITIVE_INFINITY, REMEMBERED_VALUES_MAX);
  /** Bumped when a write starts and when it ends: a read that saw it change remembers nothing. */
  #generation = 0;
  /** Writes (and clears) under way. */
  #writing = 0;

  /** Over `store` (the session's auth port); keeps the values of the `remembered` categories. */
  constructor(store: AuthStateStore, remembered: readonly string[] = []) {
    this.#store = store;
    this.#remembered = new Set(remembered);
  }

  /**
   * The values of `ids` in `category`, asking the store only for ids not known.
   * @throws the store's error (nothing is remembered then).
   */
  async get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const ask: string[] = [];
    for (const id of ids) {
      const key = keyOf(category, id);
      const value = this.#values.get<string>(key);
      if (value !== undefined) out.set(id, value);
      else if (this.#absent.get<true>(key) === undefined) ask.push(id);
    }
    if (ask.length === 0) return out;
    const quiet = this.#writing === 0;
    const generation = this.#generation;
    const found = await this.#store.get(category, ask);
    const remember = quiet && generation === this.#generation;
    for (const id of ask) {
      const value = found.get(id);
      if (value !== undefined) out.set(id, value);
      if (!remember) continue;
      if (value === undefined) this.#absent.set(keyOf(category, id), true);
      else if (this.#remembered.has(category)) this.#values.set(keyOf(category, id), value);
    }
    return out;
  }

  /**
   * Writes `entries` through to the store (all or none); once written, a deleted entry is known absent and
   * remembered categories keep their new values.
   * @throws the store's error, after forgetting every entry it named.
   */
  async set(entries: readonly { category: string; id: string; value: string | null }[]): Promise<void> {
    const keys = entries.map((entry) => keyOf(entry.category, entry.id));
    for (const key of keys) this.#forget(key);
    this.#begin();
    const started = this.#generation;
    try {
      await this.#store.set(entries);
    } finally {
      this.#end();
    }
    // Only when no other write ran beside this one: two writes of one key could have committed in either order.
    if (this.#writing > 0 || this.#generation !== started + 1) return;
    for (const [index, entry] of entries.entries()) {
      const key = keys[index];
      if (key === undefined) continue;
      if (entry.value === null) this.#absent.set(key, true);
      else if (this.#remembered.has(entry.category)) this.#values.set(key, entry.value);
    }
  }

  /** Every entry of one category, from the store (nothing is remembered). @throws the store's error. */
  list(category: string): Promise<Map<string, string>> {
    return this.#store.list(category);
  }

  /** Deletes every entry of the instance and forgets everything. @throws the store's error. */
  async clear(): Promise<void> {
    this.#absent.flushAll();
    this.#values.flushAll();
    this.#begin();
    try {
      await this.#store.clear();
    } finally {
      this.#end();
      this.#absent.flushAll();
      this.#values.flushAll();
    }
  }

  #begin(): void {
    this.#writing += 1;
    this.#generation += 1;
  }

  #end(): void {
    this.#writing -= 1;
    this.#generation += 1;
  }

  #forget(key: string): void {
    this.#absent.del(key);
    this.#values.del(key);
  }
}

/** The memo's key of entry `id` of `category` (NUL cannot occur in either). */
function keyOf(category: string, id: string): string {
  return `${category}\0${id}`;
}
