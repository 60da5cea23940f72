/**
 * Listeners per instance for the in-process fan-outs that speak after a commit (the dashboard's live view,
 * src/events/live-feed.ts; the event streams' wake-up, src/events/event-commits.ts). An instance nobody listens to
 * holds nothing.
 */
export class InstanceListeners<A extends unknown[]> {
  readonly #byInstance = new Map<string, Set<(...args: A) => void>>();

  /** Calls `listener` on every {@link notify} of `instanceId` until the returned function is called. */
  subscribe(instanceId: string, listener: (...args: A) => void): () => void {
    let set = this.#byInstance.get(instanceId);
    if (!set) {
      set = new Set();
      this.#byInstance.set(instanceId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#byInstance.get(instanceId) === set) this.#byInstance.delete(instanceId);
    };
  }

  /**
   * Calls every listener of `instanceId` with `args`. A listener that throws (a closed stream) affects neither the
   * caller (the recorder) nor the other listeners.
   */
  notify(instanceId: string, ...args: A): void {
    for (const listener of this.#byInstance.get(instanceId) ?? []) {
      try {
        listener(...args);
      } catch {
        // Listeners must not throw; one that does is skipped.
      }
    }
  }

  /** Calls every listener of every instance with `args` (as {@link notify} does for one instance). */
  notifyAll(...args: A): void {
    for (const instanceId of [...this.#byInstance.keys()]) this.notify(instanceId, ...args);
  }

  /** How many listeners are subscribed, over every instance. */
  get count(): number {
    let count = 0;
    for (const set of this.#byInstance.values()) count += set.size;
    return count;
  }
}
