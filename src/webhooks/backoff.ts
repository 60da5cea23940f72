/**
 * Retry timing of webhook deliveries (DESIGN D10): the delays after each failed attempt come from the
 * configured schedule (`WEBHOOK_RETRY_SCHEDULE`, default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), each with
 * ±20 % jitter; a `Retry-After` answer replaces the jittered delay, clamped to 1×–2× the scheduled delay.
 * Pure functions: the delivery row holds all retry state, the worker holds none.
 */

/** Jitter applied to each scheduled delay: ±20 % (DESIGN D10). */
export const JITTER = 0.2;

/**
 * Attempts a delivery gets in one round: the first try plus one per scheduled retry delay.
 * @param scheduleMs the retry delays, milliseconds.
 */
export function maxAttemptsOf(scheduleMs: readonly number[]): number {
  return scheduleMs.length + 1;
}

/**
 * Parses a `Retry-After` header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
 * @param nowMs the current time, epoch ms (for the HTTP-date form).
 * @returns the delay in milliseconds (≥ 0), or undefined when absent or unparseable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}

/** Input of {@link retryDelayMs}. */
export interface RetryInput {
  /** Attempts made in this round, including the one that just failed (≥ 1). */
  attemptsMade: number;
  /** Attempts allowed in this round (the delivery row's `max_attempts`). */
  maxAttempts: number;
  /** Retry delays, milliseconds. */
  scheduleMs: readonly number[];
  /** A uniform random number in [0, 1) choosing the jitter. */
  random: number;
  /** The receiver's `Retry-After`, milliseconds, when it sent one. */
  retryAfterMs?: number;
}

/**
 * The delay before the next attempt, milliseconds, or null when no attempt is left (the delivery becomes
 * `failed`). Delay `n` of the schedule follows failed attempt `n`; if the schedule became shorter than the
 * row's `max_attempts` (configuration changed), its last delay is reused.
 */
export function retryDelayMs(input: RetryInput): number | null {
  if (input.attemptsMade >= input.maxAttempts || input.scheduleMs.length === 0) return null;
  const index = Math.min(input.attemptsMade - 1, input.scheduleMs.length - 1);
  const base = input.scheduleMs[Math.max(0, index)] ?? 0;
  if (input.retryAfterMs !== undefined) return Math.min(Math.max(input.retryAfterMs, base), 2 * base);
  const factor = 1 - JITTER + 2 * JITTER * Math.min(Math.max(input.random, 0), 1);
  return Math.round(base * factor);
}
