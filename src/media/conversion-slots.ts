import { DomainError } from '../domain/errors.ts';

/**
 * At most `limit` media conversions of a process at once, the others waiting their turn in arrival order
 * (docs/decisions/0017-messages-and-media.md). A sharp conversion holds one of libuv's threads (4 by default) for its
 * whole run, the threads every file system call, DNS lookup and crypto job of the process waits for: conversions
 * beyond a few would stall all of them. At most `maxWaiting` wait; a conversion past that is refused at once.
 */
export class ConversionSlots {
  readonly #limit: number;
  readonly #maxWaiting: number;
  readonly #label: string;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  /**
   * @param limit conversions running at once (≥ 1).
   * @param maxWaiting conversions waiting for a slot at most (≥ 0).
   * @param label what is converted, in the refusal's message (`sticker`).
   */
  constructor(limit: number, maxWaiting: number, label: string) {
    this.#limit = limit;
    this.#maxWaiting = maxWaiting;
    this.#label = label;
  }

  /** Conversions running now. */
  get running(): number {
    return this.#running;
  }

  /** Conversions waiting for a slot now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Runs `task` once a slot is free, and frees the slot when it settles.
   * @throws DomainError not_ready (503) `<label> conversions are busy; retry shortly` when `maxWaiting` already
   *   wait; whatever `task` throws.
   */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#limit) {
      if (this.#waiting.length >= this.#maxWaiting) {
        throw new DomainError('not_ready', `${this.#label} conversions are busy; retry shortly`);
      }
      // The slot is handed over by the task that frees it, so #running never passes #limit.
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else {
      this.#running++;
    }
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
