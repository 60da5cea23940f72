/**
 * Callers waiting for a lifecycle condition (docs/decisions/0016-session-lifecycle.md: connect with `immediate:false`
 * waits for login at most 10 s). Each waiter is bounded by its own timeout and resolves with the condition's value
 * when woken or when it times out; the lifecycle wakes them on every change that may settle them (open, stop,
 * disconnect).
 */
export class Waiters {
  readonly #waiting = new Set<() => void>();

  /** Resolves `check()` once woken or after `timeoutMs` ms; true at once when `check()` already holds. */
  wait(check: () => boolean, timeoutMs: number): Promise<boolean> {
    if (check()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        resolve(check());
      };
      const timer = setTimeout(done, timeoutMs);
      this.#waiting.add(done);
    });
  }

  /** Wakes every waiter: each resolves with its condition's current value. */
  wakeAll(): void {
    for (const wake of [...this.#waiting]) wake();
  }
}
