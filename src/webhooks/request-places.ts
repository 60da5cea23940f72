/**
 * The webhook requests a process may have in flight at once, over all its lanes (`WEBHOOK_MAX_IN_FLIGHT`,
 * docs/decisions/0089-lane-window-default.md). A lane's first request takes a place when its batch is launched,
 * which the claim made sure was free; the rest of its window takes only the places still free when it opens, so a
 * process with many busy lanes sends one request on each before it widens any of them. Places are counted in
 * memory: they bound this process's sockets and its receivers' load, not a stored promise.
 */
export class RequestPlaces {
  readonly #limit: number;
  #taken = 0;

  /** `limit`: the most requests in flight at once (at least 1). */
  constructor(limit: number) {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  /** The most places (at least 1). */
  get limit(): number {
    return this.#limit;
  }

  /** Places not taken (0 when places taken unconditionally by {@link hold} went over the limit). */
  get free(): number {
    return Math.max(0, this.#limit - this.#taken);
  }

  /** Places taken now. */
  get taken(): number {
    return this.#taken;
  }

  /**
   * Takes up to `wanted` places (a whole number ≥ 0) and returns how many it took: as many as are free, at most
   * `wanted`. Each must be given back with {@link give}.
   */
  take(wanted: number): number {
    const granted = Math.max(0, Math.min(wanted, this.free));
    this.#taken += granted;
    return granted;
  }

  /**
   * Takes `count` places whatever is free: for the first request of a lane batch whose claim was weighed against
   * {@link free} already, or one found made after its commit lost its answer.
   */
  hold(count: number): void {
    this.#taken += count;
  }

  /** Gives back `count` places taken by {@link take} or {@link hold}. */
  give(count: number): void {
    this.#taken = Math.max(0, this.#taken - count);
  }
}
