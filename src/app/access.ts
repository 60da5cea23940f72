import type { AuthContext, KeyAuthenticator } from '../auth/authenticator.ts';
import {
  limitsOf,
  type PlanLimits,
  type PlanRateLimiter,
  type RateLimitDecision,
} from '../ratelimit/limiter.ts';

export type { AuthContext } from '../auth/authenticator.ts';
export { hasScope } from '../auth/authenticator.ts';

/** One request counted against its organization's plan: the plan's limits and the limiter's decision. */
export interface RateCharge {
  limits: PlanLimits;
  decision: RateLimitDecision;
}

/**
 * Who may call the API and how often (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0019-rate-limits-and-plans.md): API keys checked against the store (cached, revocations polled) and
 * each request counted in its organization's minute and day windows.
 */
export class AccessService {
  readonly #keys: KeyAuthenticator;
  readonly #limiter: PlanRateLimiter;

  constructor(deps: { keys: KeyAuthenticator; limiter: PlanRateLimiter }) {
    this.#keys = deps.keys;
    this.#limiter = deps.limiter;
  }

  /**
   * The caller of an `Authorization` header value (`Bearer svc_…`).
   * @throws DomainError unauthenticated `invalid API key` for a missing, unknown, revoked or expired key (one
   *   message for all, docs/decisions/0020-security-promises.md).
   */
  authenticate(authorization: string | undefined): Promise<AuthContext> {
    return this.#keys.authenticate(authorization);
  }

  /** Counts one request of `auth`'s organization and environment against its plan; `decision.allowed` says whether it may run. */
  async charge(auth: AuthContext): Promise<RateCharge> {
    const limits = limitsOf(auth.org);
    return { limits, decision: await this.#limiter.consume(auth.org.id, auth.env, limits) };
  }
}
