/**
 * The gate of one `connect()` call (docs/decisions/0025-live-engine.md: connect answers promptly): open from the
 * start of the attempt until the platform answers once (a QR code or an open connection), a close rejects it, or
 * `deadlineMs` passes. The lifecycle settles it; the deadline timer never outlives the gate.
 */
export class FirstAnswer {
  #pending: { resolve: () => void; reject: (error: unknown) => void; timer: NodeJS.Timeout } | null = null;

  /** True while a `connect()` waits for the platform's first answer. */
  get open(): boolean {
    return this.#pending !== null;
  }

  /** Opens the gate; `onDeadline` runs if nothing settled it within `deadlineMs` ms. */
  start(deadlineMs: number, onDeadline: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(onDeadline, deadlineMs);
      this.#pending = { resolve, reject, timer };
    });
  }

  /** The platform answered: `connect()` resolves. No-op when closed. */
  settle(): void {
    this.take()?.resolve();
  }

  /**
   * Closes the gate and hands back its callbacks (so the caller can clean up before rejecting); null when already
   * closed.
   */
  take(): { resolve: () => void; reject: (error: unknown) => void } | null {
    const pending = this.#pending;
    if (!pending) return null;
    this.#pending = null;
    clearTimeout(pending.timer);
    return pending;
  }
}
