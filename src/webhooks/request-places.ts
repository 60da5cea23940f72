/**
 * The webhook requests a process may have in flight at once, over all its lanes (`WEBHOOK_MAX_IN_FLIGHT`,
 * docs/decisions/0089-lane-window-default.md). The worker takes a place for each lane's first request when it
 * launches the lane's batch (a claim takes no more lanes than there are free places), and the lane gives it back
 * when that request's slot ends. A lane's window takes only the places left once one is kept for every lane the
 * process may still claim ({@link take}'s `keep`), so a busy lane never holds the place another instance's first
 * request needs. Places are counted in memory: they bound this process's sockets and its receivers' load, not a
 * stored promise.
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

  /** Places not taken (0 when none). */
  get free(): number {
    return Math.max(0, this.#limit - this.#taken);
  }

  /**
   * Places taken now. Never below 0 unless a place was given back twice (a fault the tests look for: nothing
   * clamps it).
   */
  get taken(): number {
    return this.#taken;
  }

  /**
   * Takes up to `wanted` places (a whole number ≥ 0) of those free beyond `keep` (the places to leave for first
   * requests still to come) and returns how many it took. Each must be given back with {@link give}.
   */
  take(wanted: number, keep = 0): number {
    const granted = Math.max(0, Math.min(wanted, this.free - keep));
    this.#taken += granted;
    return granted;
  }

  /**
   * Takes `count` places whatever is free: the first requests of the lane batches of a claim, which took no more
   * lanes than there were free places.
   */
  hold(count: number): void {
    this.#taken += count;
  }

  /** Gives back `count` places taken by {@link take} or {@link hold}. */
  give(count: number): void {
    this.#taken -= count;
  }
}

/**
 * Shares `free` places (a whole number; none when ≤ 0) among windows that can use `demands[i]` places each (whole
 * numbers ≥ 0), fairly: each window gets as many as it can use or an even share, whichever is less, the share of a
 * window that needs less going to the others (max-min fairness, filled from the smallest demand up; an even share is
 * rounded up, so the first windows filled may get one more than the last). → the places of each window, in the order
 * of `demands`; never more than `free` in all, nor than a window's demand. The worker opens the windows of one claim
 * with these shares (docs/decisions/0090-window-places-shared.md).
 */
export function windowShares(demands: readonly number[], free: number): number[] {
  const shares = demands.map(() => 0);
  const order = demands.map((demand, index) => ({ demand: Math.max(0, demand), index }));
  order.sort((a, b) => a.demand - b.demand);
  let left = Math.max(0, free);
  let windows = order.length;
  for (const { demand, index } of order) {
    const share = Math.min(demand, Math.ceil(left / windows));
    shares[index] = share;
    left -= share;
    windows -= 1;
  }
  return shares;
}
