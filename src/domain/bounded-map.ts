/** Options of a {@link BoundedMap}. */
export interface BoundedMapOptions<K, V> {
  /** Told each entry the bound pushed out, after it left the map (not entries removed by `delete` or `clear`). */
  onEvict?: (key: K, value: V) => void;
}

/**
 * A `Map` of at most {@link bound} entries that drops its oldest entry when a new one would go past the bound: the
 * in-memory caches and "recent ids" lists that must not grow for as long as the process runs.
 *
 * Order: {@link set} makes its entry the newest, whether the key was held or not (a held key moves to the end);
 * {@link use} does the same for a held key without changing its value. `get`, `has`, `delete` and iteration do not
 * reorder, and iteration runs oldest first. So a map whose readers call `get` keeps insertion order (the oldest
 * written goes first), and one whose readers call {@link use} is least-recently-used (the least recently used goes
 * first).
 *
 * Bound: entries, a whole number of at least 1; a {@link set} that makes the map hold `bound + 1` entries removes
 * the oldest one (then tells `onEvict`), so the entry just set always stays.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  /** Most entries held at once. */
  readonly bound: number;
  readonly #onEvict: ((key: K, value: V) => void) | undefined;

  /** An empty map of at most `bound` entries. @throws RangeError when `bound` is not a whole number of at least 1. */
  constructor(bound: number, options: BoundedMapOptions<K, V> = {}) {
    if (!Number.isInteger(bound) || bound < 1) {
      throw new RangeError(`a bounded map needs a bound of at least 1 entry, got ${bound}`);
    }
    super();
    this.bound = bound;
    this.#onEvict = options.onEvict;
  }

  /** Holds `value` for `key` as the newest entry; drops the oldest entry when that takes the map past its bound. */
  override set(key: K, value: V): this {
    super.delete(key);
    super.set(key, value);
    if (super.size > this.bound) this.#evictOldest();
    return this;
  }

  /**
   * The value held for `key`, made the newest entry (a use, for least-recently-used order); undefined, and nothing
   * moved, when `key` is not held.
   */
  use(key: K): V | undefined {
    const value = super.get(key);
    if (value === undefined && !super.has(key)) return undefined;
    super.delete(key);
    super.set(key, value as V);
    return value;
  }

  #evictOldest(): void {
    const oldest = super.keys().next();
    if (oldest.done === true) return;
    const key = oldest.value;
    const onEvict = this.#onEvict;
    if (onEvict === undefined) {
      super.delete(key);
      return;
    }
    const value = super.get(key) as V;
    super.delete(key);
    onEvict(key, value);
  }
}
