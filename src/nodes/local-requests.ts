/**
 * The requests running on this node per instance (docs/decisions/0008-leases-and-fencing.md: a hand-over waits for
 * them): {@link enter} counts one, {@link idle} waits until an instance has none.
 */
export class LocalRequests {
  readonly #inflight = new Map<string, number>();
  readonly #idle = new Map<string, () => void>();

  /** Counts a request running locally on `instanceId`; call the returned function when it has answered. */
  enter(instanceId: string): () => void {
    this.#inflight.set(instanceId, (this.#inflight.get(instanceId) ?? 0) + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const count = (this.#inflight.get(instanceId) ?? 1) - 1;
      if (count > 0) {
        this.#inflight.set(instanceId, count);
        return;
      }
      this.#inflight.delete(instanceId);
      this.#idle.get(instanceId)?.();
    };
  }

  /** Resolves once no request runs locally on `instanceId`, or after `waitMs` ms at most. Never rejects. */
  idle(instanceId: string, waitMs: number): Promise<void> {
    if (!this.#inflight.has(instanceId)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(finish, waitMs);
      function finish() {
        clearTimeout(timer);
        resolve();
      }
      this.#idle.set(instanceId, () => {
        this.#idle.delete(instanceId);
        finish();
      });
    });
  }
}
