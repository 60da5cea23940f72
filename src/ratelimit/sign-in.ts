import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';

/** Failed sign-ins allowed per account and per client address in one window (docs/decisions/0022-dashboard.md). */
export interface SignInLimits {
  /** Failures per e-mail address per window (default 5). */
  perAccount: number;
  /** Failures per client IP address per window (default 30). */
  perAddress: number;
  /** Window length, seconds (default 900: 15 minutes). */
  windowSeconds: number;
}

/** The defaults of {@link SignInLimits} (OWASP Authentication Cheat Sheet: throttle per account and per source). */
export const SIGN_IN_LIMITS: SignInLimits = { perAccount: 5, perAddress: 30, windowSeconds: 900 };

/**
 * Counts failed dashboard sign-ins per account and per client address with `rate-limiter-flexible` (in Redis when
 * a client is given, so every process shares the counts; else in-process). A sign-in is refused before its
 * password is checked while either counter is exhausted; a success clears the account's counter.
 */
export class SignInLimiter {
  readonly #account: RateLimiterAbstract;
  readonly #address: RateLimiterAbstract;

  constructor(redis: Redis | undefined, limits: SignInLimits = SIGN_IN_LIMITS) {
    const make = (points: number, keyPrefix: string): RateLimiterAbstract =>
      redis
        ? new RateLimiterRedis({
            storeClient: redis,
            points,
            duration: limits.windowSeconds,
            keyPrefix,
            insuranceLimiter: new RateLimiterMemory({ points, duration: limits.windowSeconds, keyPrefix }),
          })
        : new RateLimiterMemory({ points, duration: limits.windowSeconds, keyPrefix });
    this.#account = make(limits.perAccount, 'parley:signin:account');
    this.#address = make(limits.perAddress, 'parley:signin:address');
  }

  /**
   * Whole seconds (≥ 1) until a sign-in for `email` from `address` may be tried again, or undefined when it may be
   * tried now.
   */
  async blockedFor(email: string, address: string): Promise<number | undefined> {
    const states = await Promise.all([this.#account.get(email), this.#address.get(address)]);
    const limits = [this.#account.points, this.#address.points];
    let wait: number | undefined;
    states.forEach((state, i) => {
      if (state && state.consumedPoints >= (limits[i] ?? 0)) {
        wait = Math.max(wait ?? 1, Math.ceil(state.msBeforeNext / 1000));
      }
    });
    return wait;
  }

  /** Counts one failed sign-in for both keys. */
  async failed(email: string, address: string): Promise<void> {
    await Promise.all([swallow(this.#account.consume(email)), swallow(this.#address.consume(address))]);
  }

  /** Forgets the account's failures after a successful sign-in. */
  async succeeded(email: string): Promise<void> {
    await this.#account.delete(email);
  }
}

async function swallow(consumed: Promise<RateLimiterRes>): Promise<void> {
  try {
    await consumed;
  } catch (rejection) {
    if (!(rejection instanceof RateLimiterRes)) throw rejection;
  }
}
