import { fenceMarginMs } from './lease-options.ts';

/** Options of a {@link FenceTimer}: the keeper's lease lifetime and renewal period (ms), clock and fence. */
export interface FenceTimerOptions {
  ttlMs: number;
  heartbeatMs: number;
  /** The clock leases are written and compared on, epoch ms (the store's). */
  now: () => number;
  /** Closes every local session: the leases could not be renewed in time. */
  onFire: () => void;
}

/**
 * The fencing timer of a lease keeper (docs/decisions/0008-leases-and-fencing.md, fencing by time): set at each
 * renewal to fire {@link fenceMarginMs} before the leases written then expire, unless a later renewal sets it again;
 * firing, it calls `onFire`, which closes every local session, so no other node can open a socket while this one still
 * has one. Read at a timer rather than at the next heartbeat, which runs up to a heartbeat late (the renewal's clock is
 * read after its first statement). Only a started timer is set ({@link start}); the timer is unreferenced.
 */
export class FenceTimer {
  readonly #options: FenceTimerOptions;
  /** Closes every local session a margin before the leases of the last renewal expire (re-armed at each renewal). */
  #timer: NodeJS.Timeout | undefined;
  /** True between `start` and `halt`: renewals arm the timer. */
  #started = false;
  /** Epoch ms at which the timer set at the last renewal fires (see {@link armed}). */
  #at = 0;

  constructor(options: FenceTimerOptions) {
    this.#options = options;
  }

  /** From now on renewals arm the timer ({@link arm}), and {@link armed} reads it. */
  start(): void {
    this.#started = true;
  }

  /** Renewals no longer arm the timer, and {@link armed} is true again; a timer already set stays set. */
  halt(): void {
    this.#started = false;
  }

  /**
   * Sets the timer for the leases of a renewal at `renewedAt` (epoch ms), which expire at `renewedAt + ttl`: it fires
   * {@link fenceMarginMs} before, unless a later renewal sets it again. Does nothing unless started.
   */
  arm(renewedAt: number): void {
    if (!this.#started) return;
    clearTimeout(this.#timer);
    const { ttlMs, heartbeatMs, now, onFire } = this.#options;
    const at = renewedAt + ttlMs - fenceMarginMs(heartbeatMs);
    this.#at = at;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        onFire();
      },
      Math.max(0, at - now()),
    );
    this.#timer.unref();
  }

  /**
   * True when a session opened now would be closed in time if no renewal succeeded from now on: the timer of the last
   * renewal is set and not yet due. Always true for a timer not started (a keeper whose `tick` is run by hand fences
   * nothing by time).
   */
  armed(): boolean {
    if (!this.#started) return true;
    return this.#timer !== undefined && this.#options.now() < this.#at;
  }

  /**
   * Cancels the pending timer; `forget` (the keeper stopped, not a start that failed) also drops it, so
   * {@link armed} reads no timer.
   */
  cancel(forget: boolean): void {
    clearTimeout(this.#timer);
    if (forget) this.#timer = undefined;
  }
}
