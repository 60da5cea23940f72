import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { DashboardPrincipal } from '../../../app/dashboard-auth.ts';
import { DomainError } from '../../../domain/errors.ts';

/** A dashboard role (docs/decisions/0022-dashboard.md), least privileged last. */
export type Role = 'owner' | 'member' | 'viewer';

/** The session cookie's name; its path is `/dashboard`, so the API under `/v1` never sees it. */
export const SESSION_COOKIE = 'parley_session';
/** The request header carrying the session's CSRF token on every state-changing request. */
export const CSRF_HEADER = 'x-csrf-token';

const RANK: Record<Role, number> = { viewer: 0, member: 1, owner: 2 };

/** Whether `role` is `least` or more privileged (docs/decisions/0022-dashboard.md). */
export function roleAtLeast(role: Role, least: Role): boolean {
  return RANK[role] >= RANK[least];
}
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The least role a dashboard route needs (docs/decisions/0022-dashboard.md), or `public` for sign-in and the
     * static page. Routes of the dashboard declare it instead of an API scope: the session cookie is their
     * credential.
     */
    dashboard?: Role | 'public';
  }
  interface FastifyRequest {
    /** The signed-in dashboard user; null outside dashboard routes. */
    principal: DashboardPrincipal | null;
  }
}

/** The signed-in user of a dashboard request. @throws DomainError internal on a public route (a wiring bug). */
export function principalOf(request: FastifyRequest): DashboardPrincipal {
  if (!request.principal) throw new DomainError('internal', 'dashboard route is missing its role');
  return request.principal;
}

/**
 * Options of the session cookie: HttpOnly, SameSite=Strict, path /dashboard, and Secure when the request came over
 * HTTPS or the server's public URL (`PUBLIC_URL`) is HTTPS (a TLS proxy in front).
 */
export function cookieOptions(request: FastifyRequest, expiresAt?: number) {
  return {
    path: '/dashboard',
    httpOnly: true,
    sameSite: 'strict' as const,
    secure: request.protocol === 'https' || request.server.services.config.publicUrl.startsWith('https:'),
    ...(expiresAt === undefined ? {} : { expires: new Date(expiresAt) }),
  };
}

/**
 * The dashboard's own authentication, added to the dashboard's encapsulated context
 * (docs/decisions/0022-dashboard.md): every route declaring a role needs a valid session cookie (401
 * `sign in to continue`), a state-changing request also the session's CSRF token in `x-csrf-token` (403
 * `missing or invalid CSRF token`), and the user a role at least the route's (403 naming the role).
 */
export function addDashboardGuard(app: FastifyInstance): void {
  const auth = app.services.app.dashboardAuth;
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('cache-control', 'no-store');
    const role = request.routeOptions.config?.dashboard;
    if (role === undefined || role === 'public') return;
    const principal = await auth.authenticate(request.cookies[SESSION_COOKIE]);
    if (!SAFE_METHODS.has(request.method)) {
      const given = request.headers[CSRF_HEADER];
      if (!auth.csrfMatches(principal, typeof given === 'string' ? given : undefined))
        throw new DomainError('forbidden', 'missing or invalid CSRF token');
    }
    if (!roleAtLeast(principal.user.role, role))
      throw new DomainError('forbidden', `this needs the ${role} role (you are ${principal.user.role})`);
    request.principal = principal;
  });
}
