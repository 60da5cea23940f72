import { BoundedMap } from '../../domain/bounded-map.ts';
import type { AuthEntry, AuthStateStore } from '../engine.ts';

/** Entries of the cached categories one session keeps at most; the least recently used go first. */
export const OWNED_STATE_ENTRIES = 256;

/**
 * The session's own simulated state, kept in memory as it is read and written (docs/decisions/0004-sandbox.md,
 * "What the sandbox keeps in memory"): an {@link AuthStateStore} over the instance's auth port that answers reads
 * of `categories` from what it last read or wrote there, and passes everything else through.
 *
 * Sound because the session is the only writer of these categories: a request for an instance is served by the
 * node holding its session and passed there from any other node (docs/deploy.md, "What happens when"), and only
 * the sandbox engine writes its categories of the auth port. A new session (after a restart or a hand-over to
 * another node) starts empty and reads the store again.
 *
 * A read that was in flight while a write of the same session ran does not keep what it read (it may predate the
 * write): each write moves a generation on, before it starts and after it is kept, and a read keeps its answer only
 * when no write started or finished since it began. An absent entry is kept as absent. At most
 * {@link OWNED_STATE_ENTRIES} entries, least recently used first out; {@link clear} and the session's close forget
 * everything.
 */
export class OwnedAuthState implements AuthStateStore {
  readonly #inner: AuthStateStore;
  readonly #categories: ReadonlySet<string>;
  /** `category\u0000id` → the value, or null when the store has none; in least-recently-used order. */
  readonly #entries = new BoundedMap<string, string | null>(OWNED_STATE_ENTRIES);
  #generation = 0;

  /** Caches `categories` of `inner` (every other category is read from `inner` each time). */
  constructor(inner: AuthStateStore, categories: readonly string[]) {
    this.#inner = inner;
    this.#categories = new Set(categories);
  }

  /** Reads `ids` of `category`: the kept ones from memory, the rest in one read of the store. */
  async get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    if (!this.#categories.has(category)) return this.#inner.get(category, ids);
    const found = new Map<string, string>();
    const missing: string[] = [];
    for (const id of ids) {
      const key = keyOf(category, id);
      const kept = this.#entries.use(key);
      if (kept === undefined) {
        missing.push(id);
        continue;
      }
      if (kept !== null) found.set(id, kept);
    }
    if (missing.length === 0) return found;
    const generation = this.#generation;
    const read = await this.#inner.get(category, missing);
    const keep = generation === this.#generation;
    for (const id of missing) {
      const value = read.get(id);
      if (value !== undefined) found.set(id, value);
      if (keep) this.#entries.set(keyOf(category, id), value ?? null);
    }
    return found;
  }

  /**
   * The kept values of `ids` of `category`, at once and without the store, when every one of them is kept (an id
   * kept as absent is left out of the map); undefined when any is not, or `category` is not cached. Counts as a use
   * of each entry for the least-recently-used order.
   */
  peek(category: string, ids: readonly string[]): Map<string, string> | undefined {
    if (!this.#categories.has(category)) return undefined;
    const keyed = ids.map((id) => [id, keyOf(category, id)] as const);
    if (!keyed.every(([, key]) => this.#entries.has(key))) return undefined;
    const found = new Map<string, string>();
    for (const [id, key] of keyed) {
      const kept = this.#entries.use(key) ?? null;
      if (kept !== null) found.set(id, kept);
    }
    return found;
  }

  /** Writes through to the store; once it committed, the written values of cached categories are kept. */
  set(entries: readonly AuthEntry[]): Promise<void> {
    return this.writeThrough(entries, () => this.#inner.set(entries));
  }

  /**
   * Runs `write`, which stores `entries` (with what else it commits: the session's `emitWith`,
   * docs/decisions/0077-state-with-its-events.md), keeping what {@link set} keeps: the entries of cached categories
   * are forgotten while it runs and kept as written once it resolved. @throws what `write` threw (nothing kept).
   */
  async writeThrough(entries: readonly AuthEntry[], write: () => Promise<void>): Promise<void> {
    const owned = entries.filter((entry) => this.#categories.has(entry.category));
    if (owned.length === 0) return write();
    this.#generation += 1;
    for (const { category, id } of owned) this.#entries.delete(keyOf(category, id));
    try {
      await write();
      for (const { category, id, value } of owned) this.#entries.set(keyOf(category, id), value);
    } finally {
      this.#generation += 1;
    }
  }

  /** Every entry of `category`, read from the store (listing is rare: it is not kept). */
  list(category: string): Promise<Map<string, string>> {
    return this.#inner.list(category);
  }

  /** Deletes every entry of the instance and forgets what was kept. */
  async clear(): Promise<void> {
    this.#generation += 1;
    this.#entries.clear();
    try {
      await this.#inner.clear();
    } finally {
      this.#generation += 1;
    }
  }

  /** Forgets what was kept (the session closes), without touching the store. */
  forget(): void {
    this.#generation += 1;
    this.#entries.clear();
  }

  /** How many entries are kept (tests check the bound). */
  get size(): number {
    return this.#entries.size;
  }
}

function keyOf(category: string, id: string): string {
  return `${category}\u0000${id}`;
}
