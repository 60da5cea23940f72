/**
 * Retry timing of webhook deliveries (docs/decisions/0005-outbox-and-delivery.md): the delays after each failed
 * attempt come from the configured schedule (`WEBHOOK_RETRY_SCHEDULE`, default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10
 * h), each lengthened by a random 0 to 20 % (never shortened: a retry never comes before its scheduled delay, so the
 * default round lasts at least the schedule's 27 h 35 min and a receiver down for a day still gets every event);
 * a `Retry-After` answer replaces the jittered delay, clamped to 1×–2× the scheduled delay. {@link RetryPolicy} is
 * the one place a worker asks when to try again; the pure functions below are its parts. The delivery row holds all
 * retry state (`attempts`, counted at claim, and `max_attempts`), the worker none.
 */

import { parseRetryAfter } from '../net/retry-after.ts';

export { parseRetryAfter };

/**
 * Jitter added to each scheduled delay: a random 0 to +20 % of it, upward only
 * (docs/decisions/0005-outbox-and-delivery.md): retries of events that failed together spread over a fifth of their
 * delay, and none comes early.
 */
export const JITTER = 0.2;

/**
 * Attempts a delivery gets in one round: the first try plus one per scheduled retry delay.
 * @param scheduleMs the retry delays, milliseconds.
 */
export function maxAttemptsOf(scheduleMs: readonly number[]): number {
  return scheduleMs.length + 1;
}

/** Input of {@link retryDelayMs}. */
export interface RetryInput {
  /** Attempts made in this round, including the one that just failed (≥ 1). */
  attemptsMade: number;
  /** Attempts allowed in this round (the delivery row's `max_attempts`). */
  maxAttempts: number;
  /** Retry delays, milliseconds. */
  scheduleMs: readonly number[];
  /** A uniform random number in [0, 1) choosing the jitter (0: the scheduled delay itself). */
  random: number;
  /** The receiver's `Retry-After`, milliseconds, when it sent one. */
  retryAfterMs?: number;
}

/**
 * The delay before the next attempt, milliseconds, or null when no attempt is left (the delivery becomes
 * `failed`). Delay `n` of the schedule follows failed attempt `n`, lengthened by `random` × {@link JITTER} (never
 * shorter than scheduled); if the schedule became shorter than the row's `max_attempts` (configuration changed), its
 * last delay is reused.
 */
export function retryDelayMs(input: RetryInput): number | null {
  if (input.attemptsMade >= input.maxAttempts || input.scheduleMs.length === 0) return null;
  const index = Math.min(input.attemptsMade - 1, input.scheduleMs.length - 1);
  const base = input.scheduleMs[Math.max(0, index)] ?? 0;
  if (input.retryAfterMs !== undefined) return Math.min(Math.max(input.retryAfterMs, base), 2 * base);
  const factor = 1 + JITTER * Math.min(Math.max(input.random, 0), 1);
  return Math.round(base * factor);
}

/** Input of {@link RetryPolicy.nextRunAt}. */
export interface NextAttemptInput {
  /** Attempts made in this round, the one that just failed included (the delivery row's `attempts`, ≥ 1). */
  attemptsMade: number;
  /** Attempts allowed in this round (the delivery row's `max_attempts`). */
  maxAttempts: number;
  /** When the failed attempt ended, epoch ms. */
  now: number;
  /** The receiver's `Retry-After` header as sent (RFC 9110 §10.2.3), when it sent one. */
  retryAfter?: string | undefined;
}

/**
 * The retry policy of webhook deliveries (docs/decisions/0005-outbox-and-delivery.md) in one object: the configured
 * schedule (`WEBHOOK_RETRY_SCHEDULE`), how many attempts a round gets, the 0 to +20 % jitter, and `Retry-After`
 * clamped to 1×–2× the scheduled delay.
 */
export class RetryPolicy {
  readonly #scheduleMs: readonly number[];
  readonly #random: () => number;

  /**
   * @param scheduleMs the delays before each retry, milliseconds.
   * @param random uniform random numbers in [0, 1) choosing the jitter (default Math.random).
   */
  constructor(scheduleMs: readonly number[], random: () => number = Math.random) {
    this.#scheduleMs = scheduleMs;
    this.#random = random;
  }

  /** Attempts a delivery queued now gets in one round (its `max_attempts`). */
  get maxAttempts(): number {
    return maxAttemptsOf(this.#scheduleMs);
  }

  /**
   * When the next attempt is due after a failed one, epoch ms, or null when the round has no attempt left (the
   * delivery becomes `failed`).
   */
  nextRunAt(input: NextAttemptInput): number | null {
    const retryAfterMs = parseRetryAfter(input.retryAfter, input.now);
    const delay = retryDelayMs({
      attemptsMade: input.attemptsMade,
      maxAttempts: input.maxAttempts,
      scheduleMs: this.#scheduleMs,
      random: this.#random(),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    });
    return delay === null ? null : input.now + delay;
  }
}
