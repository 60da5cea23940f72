import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Environment } from '../domain/environment.ts';
import type { Organization } from '../store/organizations.ts';
import type { PersistedWindows } from './persisted-window.ts';

/** Requests allowed per window (docs/api.md#rate-limits; docs/decisions/0019-rate-limits-and-plans.md). */
export interface PlanLimits {
  perMinute: number;
  perDay: number;
}

/** Limits of each plan; enterprise organizations carry their own (docs/decisions/0019-rate-limits-and-plans.md). */
export const PLAN_LIMITS = {
  free: { perMinute: 60, perDay: 1000 },
  pro: { perMinute: 300, perDay: 10_000 },
} as const satisfies Record<string, PlanLimits>;

/** The limits that apply to `org`: its plan's, or its own for enterprise (falling back to pro's when unset). */
export function limitsOf(org: Organization): PlanLimits {
  if (org.plan === 'enterprise') {
    return {
      perMinute: org.perMinute ?? PLAN_LIMITS.pro.perMinute,
      perDay: org.perDay ?? PLAN_LIMITS.pro.perDay,
    };
  }
  return PLAN_LIMITS[org.plan];
}

/** One window's standing after a request: its quota, what remains and seconds until it resets. */
export interface WindowState {
  name: WindowName;
  quota: number;
  /** Window length, seconds. */
  window: number;
  remaining: number;
  /** Seconds until the window frees requests again (whole, ≥ 0). */
  reset: number;
}

/** The outcome of {@link PlanRateLimiter.consume}: allowed or not, and both windows' state. */
export interface RateLimitDecision {
  allowed: boolean;
  /**
   * Whole seconds (≥ 1) until a request is allowed again, set when not allowed: the longest wait among the spent
   * windows (those with nothing remaining), so a minute refusal while the day is spent too says the day's wait
   * (docs/decisions/0019-rate-limits-and-plans.md). It equals the largest `reset` of those windows in the `RateLimit`
   * header (1 when that is 0).
   */
  retryAfter?: number;
  windows: [WindowState, WindowState];
}

/** Length of each window, seconds (docs/decisions/0019-rate-limits-and-plans.md). */
const WINDOW_SECONDS = { minute: 60, day: 86_400 } as const;
type WindowName = keyof typeof WINDOW_SECONDS;

/**
 * Counts requests per organization and environment in two fixed windows, per minute and per day
 * (docs/decisions/0019-rate-limits-and-plans.md), with `rate-limiter-flexible`: in Redis when a client is given
 * (shared by every process, with an in-process insurance limiter should Redis fail), else in-process. Only served
 * requests are counted: a request the minute window refuses is given back to it and does not consume the day
 * window; one the day window refuses is given back to both. So a raised limit lets the organization go on at its
 * next request, from what it was served (docs/decisions/0019-rate-limits-and-plans.md), however many it was refused.
 *
 * In-process, the day window survives restarts through {@link PersistedWindows} (seeded from the store once per
 * key, written back every second and at a graceful stop; see its docstring for the crash margin). The minute
 * window stays in memory only: a restart takes seconds, so forgetting it lets a client send at most one more
 * minute's quota once per restart, far less than the day window's stake, and persisting it would cost the same
 * writes for a window that is over before most restarts complete.
 */
export class PlanRateLimiter {
  readonly #redis: Redis | undefined;
  readonly #prefix: string;
  readonly #persisted: PersistedWindows | undefined;
  readonly #limiters = new Map<string, RateLimiterAbstract>();

  /**
   * @param redis a connected ioredis client, or undefined for in-process counters.
   * @param options `persisted`: where in-process day windows are kept across restarts (ignored with Redis).
   */
  constructor(
    redis: Redis | undefined,
    prefix = 'parley:rl',
    options: { persisted?: PersistedWindows } = {},
  ) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#persisted = redis ? undefined : options.persisted;
    this.#persisted?.start();
  }

  /** Writes the day windows counted in-process to the store and stops doing so (graceful stop). */
  async close(): Promise<void> {
    await this.#persisted?.stop();
  }

  /**
   * Consumes one request of `orgId` in `env` under `limits`, or none when it is refused (the windows' state then
   * says what was served). @throws only when the store fails without insurance.
   */
  async consume(orgId: string, env: Environment, limits: PlanLimits): Promise<RateLimitDecision> {
    const key = `${orgId}:${env}`;
    const minute = this.#limiter('minute');
    const day = this.#limiter('day');
    const persisted = this.#persisted;
    const kept = persisted && day instanceof RateLimiterMemory ? day : undefined;
    if (kept) {
      const seeding = persisted?.prepare('day', kept, key);
      if (seeding) await seeding;
    }
    const minuteRes = await consumeOne(minute, key, limits.perMinute);
    if (!minuteRes.allowed) {
      // Refused: the point goes back, and the day window is not consumed.
      await minute.reward(key, 1);
      const dayRes = (await day.get(key)) ?? undefined;
      return refused([
        windowState('minute', limits.perMinute, minuteRes.res, 1),
        windowState('day', limits.perDay, dayRes),
      ]);
    }
    const dayRes = await consumeOne(day, key, limits.perDay);
    if (!dayRes.allowed) {
      // Refused: the point goes back to both windows, before the day window is marked for its write.
      await day.reward(key, 1);
      await minute.reward(key, 1);
      if (kept) persisted?.counted('day', kept, key);
      return refused([
        windowState('minute', limits.perMinute, minuteRes.res, 1),
        windowState('day', limits.perDay, dayRes.res, 1),
      ]);
    }
    if (kept) persisted?.counted('day', kept, key);
    return {
      allowed: true,
      windows: [
        windowState('minute', limits.perMinute, minuteRes.res),
        windowState('day', limits.perDay, dayRes.res),
      ],
    };
  }

  /**
   * Both windows' standing for `orgId` in `env` without consuming a request (the dashboard's usage page).
   * @throws only when the store fails without insurance.
   */
  async usage(orgId: string, env: Environment, limits: PlanLimits): Promise<[WindowState, WindowState]> {
    const key = `${orgId}:${env}`;
    const minute = this.#limiter('minute');
    const day = this.#limiter('day');
    const persisted = this.#persisted;
    if (persisted && day instanceof RateLimiterMemory) {
      const seeding = persisted.prepare('day', day, key);
      if (seeding) await seeding;
    }
    return [
      windowState('minute', limits.perMinute, (await minute.get(key)) ?? undefined),
      windowState('day', limits.perDay, (await day.get(key)) ?? undefined),
    ];
  }

  /**
   * The counter of window `name`, one for every plan: a plan's quota is applied to its count when a request is
   * consumed ({@link consumeOne}), so a change of plan or of an organization's own limits keeps what was spent.
   */
  #limiter(name: WindowName): RateLimiterAbstract {
    let limiter = this.#limiters.get(name);
    if (!limiter) {
      const duration = WINDOW_SECONDS[name];
      const keyPrefix = `${this.#prefix}:${name}`;
      const points = COUNT_ONLY_POINTS;
      limiter = this.#redis
        ? new RateLimiterRedis({
            storeClient: this.#redis,
            points,
            duration,
            keyPrefix,
            insuranceLimiter: new RateLimiterMemory({ points, duration, keyPrefix }),
          })
        : new RateLimiterMemory({ points, duration, keyPrefix });
      this.#limiters.set(name, limiter);
    }
    return limiter;
  }
}

/** The limiters only count (the quota is checked by {@link consumeOne}): a bound no window ever reaches. */
const COUNT_ONLY_POINTS = 2 ** 31 - 1;

async function consumeOne(
  limiter: RateLimiterAbstract,
  key: string,
  quota: number,
): Promise<{ allowed: boolean; res: RateLimiterRes }> {
  const res = await limiter.consume(key, 1);
  return { allowed: res.consumedPoints <= quota, res };
}

/**
 * A refusal with `windows`: `retryAfter` is the longest `reset` among the spent windows (nothing remaining), at
 * least 1, since a request is allowed only once every spent window has freed one
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
function refused(windows: [WindowState, WindowState]): RateLimitDecision {
  let wait = 0;
  for (const w of windows) if (w.remaining === 0) wait = Math.max(wait, w.reset);
  return { allowed: false, retryAfter: Math.max(1, wait), windows };
}

/**
 * A window's standing from the limiter's answer (`res` undefined: nothing counted yet in this window), less the
 * `refunded` points given back after that answer (a refused request).
 */
function windowState(
  name: WindowName,
  quota: number,
  res: RateLimiterRes | undefined,
  refunded = 0,
): WindowState {
  const seconds = WINDOW_SECONDS[name];
  if (!res) return { name, quota, window: seconds, remaining: quota, reset: seconds };
  const used = Math.max(0, res.consumedPoints - refunded);
  return {
    name,
    quota,
    window: seconds,
    remaining: Math.max(0, quota - used),
    reset: Math.max(0, Math.ceil(res.msBeforeNext / 1000)),
  };
}

/**
 * `RateLimit-Policy` header value (IETF httpapi ratelimit-headers draft,
 * docs/decisions/0019-rate-limits-and-plans.md).
 */
export function policyHeader(limits: PlanLimits): string {
  return `"minute";q=${limits.perMinute};w=${WINDOW_SECONDS.minute}, "day";q=${limits.perDay};w=${WINDOW_SECONDS.day}`;
}

/**
 * `RateLimit` header value: each window's remaining requests and seconds to reset
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
export function rateLimitHeader(decision: RateLimitDecision): string {
  return decision.windows.map((w) => `"${w.name}";r=${w.remaining};t=${w.reset}`).join(', ');
}
