import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type AuthContext, hasScope } from '../../app/access.ts';
import { DomainError, errors } from '../../domain/errors.ts';
import type { Scope } from '../../domain/scope.ts';
import { policyHeader, rateLimitHeader, type WindowState } from '../../ratelimit/limiter.ts';
import { callbackHook } from '../hook-style.ts';
import { isForwarded } from './forward.ts';

/** What a route declares in its `config` (checked by this plugin). */
export interface RouteAuthConfig {
  /**
   * The scope the route needs (docs/decisions/0003-scopes-and-keys.md), or `public` for /healthz, /docs and the like.
   */
  scope?: Scope | 'public';
  /** Test-environment only (sandbox helpers, docs/decisions/0004-sandbox.md): a live key gets 404. */
  testOnly?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig extends RouteAuthConfig {}
  interface FastifyRequest {
    /** The verified caller; null on public routes. */
    auth: AuthContext | null;
  }
}

/** The verified caller of a request. @throws DomainError internal when called on a public route (a wiring bug). */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new DomainError('internal', 'route is missing its auth scope');
  return request.auth;
}

/**
 * Authentication, scope check and rate limiting for every route that declares a scope
 * (docs/decisions/0024-engines-and-data-flow.md order: auth → scope → rate limit → validation). Sets
 * `RateLimit-Policy` and `RateLimit` on every authenticated response, and `Retry-After` with a 429
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
export const authPlugin = fp(
  async (app: FastifyInstance) => {
    const { metrics } = app.services;
    const { access } = app.services.app;
    app.decorateRequest('auth', null);

    /** Authenticates a request to a route of `scope`, checks the scope and charges the key's limits. */
    const admit = async (
      request: FastifyRequest,
      reply: FastifyReply,
      scope: Scope,
      testOnly: boolean,
    ): Promise<void> => {
      const auth = await access.authenticate(request.headers.authorization);
      if (testOnly && auth.env !== 'test') {
        throw errors.notFound('sandbox helpers exist only for svc_test_ keys');
      }
      if (!hasScope(auth, scope)) throw errors.missingScope(scope);
      request.auth = auth;
      // A request another node forwarded was counted there (docs/decisions/0008-leases-and-fencing.md: limits are
      // shared through Redis).
      if (isForwarded(request, app.services.cluster)) return;
      const { limits, decision } = await access.charge(auth);
      reply.header('ratelimit-policy', policyHeader(limits));
      reply.header('ratelimit', rateLimitHeader(decision));
      if (!decision.allowed) {
        const violated = decision.windows.find((w: WindowState) => w.remaining === 0)?.name ?? 'minute';
        metrics.rateLimited.inc({ window: violated });
        throw new DomainError('rate_limited', 'rate limit exceeded', {
          retryAfter: decision.retryAfter ?? 1,
        });
      }
    };
    // Public routes (health, metrics) pass it without waiting: callback style (src/http/hook-style.ts).
    app.addHook(
      'onRequest',
      callbackHook((request, reply) => {
        const config = request.routeOptions.config;
        const scope = config?.scope;
        if (scope === undefined || scope === 'public') return undefined;
        return admit(request, reply, scope, config?.testOnly === true);
      }),
    );
  },
  { name: 'parley-auth', dependencies: ['parley-services'] },
);
