import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import { KeyAuthenticator } from '../auth/authenticator.ts';
import type { Config } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import { PlanRateLimiter } from '../ratelimit/limiter.ts';
import { PersistedWindows } from '../ratelimit/persisted-window.ts';
import { SignInLimiter } from '../ratelimit/sign-in.ts';
import type { Store } from '../store/database.ts';

/** Who may call and how often: API keys, plan limits and dashboard sign-in limits. */
export interface AccessParts {
  keys: KeyAuthenticator;
  limiter: PlanRateLimiter;
  signInLimiter: SignInLimiter;
}

/**
 * Builds the key authenticator (started: it polls revocations every `revocationPollMs`, default 1000 ms) and the
 * limiters. Without Redis the day window is kept in the store across restarts
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
export function wireAccess(
  config: Config,
  deps: {
    store: Store;
    redis: Redis | undefined;
    clock: Clock;
    logger: FastifyBaseLogger;
    revocationPollMs?: number | undefined;
  },
): AccessParts {
  const { store, redis, clock, logger } = deps;
  const keys = new KeyAuthenticator(store.db, {
    ttlMs: config.authCacheTtlMs,
    revocationPollMs: deps.revocationPollMs ?? 1000,
    touchEveryMs: 60_000,
    clock,
    logger,
  });
  keys.start();
  const limiter = new PlanRateLimiter(redis, undefined, {
    ...(redis ? {} : { persisted: new PersistedWindows({ db: store.db, logger }) }),
  });
  return { keys, limiter, signInLimiter: new SignInLimiter(redis, { clock }) };
}
