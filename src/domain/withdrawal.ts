/**
 * How a synchronous send's wait learns that its caller left (docs/decisions/0009-sends-as-jobs.md: a client gone
 * before the answer withdraws its wait, and the outcome becomes a `MessageStatus` event instead).
 *
 * A wait needs three members of an `AbortSignal`, and every synchronous send makes one such signal. Node's
 * `AbortController` builds an `EventTarget` for it (its listener map, its validation of each listener): about 3 % of
 * the main thread in a send run (docs/benchmarks.md, step 86). {@link Withdrawal} is those three members on a
 * plain object, and an `AbortSignal` still fits {@link WaitSignal}, so a caller may pass either. An outbound
 * request's deadline (src/net/outbound-guard.ts, one per webhook delivery) is one too, with `removeEventListener`.
 */

/**
 * What a wait listens to for its caller leaving: the part of an `AbortSignal` it uses (an `AbortSignal` fits).
 * `aborted` and `reason` say whether and why the caller left; `addEventListener('abort', …, { once: true })` calls the
 * listener once when it leaves later, and never when it had left already (as `AbortSignal` does: check `aborted`
 * first).
 */
export interface WaitSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options: { once: true }): void;
}

/**
 * A {@link WaitSignal} whose listeners can also be taken off before it aborts: what an outbound request's deadline
 * is given to (its address lookup, its turn on a channel, undici's request, which looks for `addEventListener` and
 * `removeEventListener` on the signal it is given). An `AbortSignal` fits.
 */
export interface RequestSignal extends WaitSignal {
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A {@link RequestSignal} its owner ends with {@link withdraw}, in place of an `AbortController` and its signal. Its
 * listeners are called in the order they were added, once; those added after it ended, or removed before, are never
 * called.
 */
export class Withdrawal implements RequestSignal {
  #aborted = false;
  #reason: unknown;
  #listeners: (() => void)[] | undefined;

  /** True once {@link withdraw} ran. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** What {@link withdraw} was given; undefined before. */
  get reason(): unknown {
    return this.#reason;
  }

  /** Adds `listener`, called once when {@link withdraw} runs; ignored once it ran (`type` and `options` as the signal's). */
  addEventListener(_type: 'abort', listener: () => void, _options?: { once: true }): void {
    if (this.#aborted) return;
    if (this.#listeners === undefined) this.#listeners = [listener];
    else this.#listeners.push(listener);
  }

  /** Takes `listener` off (its first addition still pending); nothing when it is not there (`type` as the signal's). */
  removeEventListener(_type: 'abort', listener: () => void): void {
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    const index = listeners.indexOf(listener);
    if (index === -1) return;
    if (listeners.length === 1) this.#listeners = undefined;
    else listeners.splice(index, 1);
  }

  /**
   * Ends it with `reason` and calls the listeners; a second call does nothing. A listener that throws does not stop
   * the others: the first such error is thrown once all of them ran.
   */
  withdraw(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners === undefined) return;
    let failed: { error: unknown } | undefined;
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        failed ??= { error };
      }
    }
    if (failed !== undefined) throw failed.error;
  }
}

/**
 * A signal that aborts when `first` or `second` does, with that one's reason (`AbortSignal.any` for
 * {@link WaitSignal}s); aborted already when either is.
 */
export function eitherSignal(first: WaitSignal, second: WaitSignal): WaitSignal {
  const either = new Withdrawal();
  for (const signal of [first, second]) {
    if (signal.aborted) {
      either.withdraw(signal.reason);
      return either;
    }
  }
  first.addEventListener('abort', () => either.withdraw(first.reason), { once: true });
  second.addEventListener('abort', () => either.withdraw(second.reason), { once: true });
  return either;
}
