import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ok } from '../../schemas.ts';
import { cookieOptions, principalOf, SESSION_COOKIE } from './guard.ts';

const SignInBody = Type.Object({
  email: Type.String({ minLength: 1, maxLength: 320 }),
  password: Type.String({ minLength: 1, maxLength: 1024 }),
});

const PasswordBody = Type.Object({
  currentPassword: Type.String({ minLength: 1, maxLength: 1024 }),
  newPassword: Type.String({ minLength: 1, maxLength: 1024 }),
});

/**
 * Sign-in, sign-out and the signed-in user (docs/decisions/0022-dashboard.md). Sign-in answers a wrong password and
 * an unknown e-mail with the same 401 body, and 429 with `retryAfter` while the account's growing wait or the client
 * address's window is not over (docs/dashboard.md "Signing in"); on success it sets the session cookie and returns
 * the CSRF token the page sends back. `POST /password` changes the signed-in user's password (400 on a wrong current
 * password) and signs out the user's other sessions.
 */
export async function accountRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const auth = app.services.app.dashboardAuth;
  const dashboard = app.services.app.dashboard;

  app.post(
    '/sign-in',
    { config: { dashboard: 'public' }, schema: { hide: true, body: SignInBody } },
    async (request, reply) => {
      const signedIn = await auth.signIn(request.body, request.ip);
      reply.setCookie(SESSION_COOKIE, signedIn.sessionId, cookieOptions(request, signedIn.expiresAt));
      return ok({
        user: signedIn.user,
        csrfToken: signedIn.csrfToken,
        expiresAt: new Date(signedIn.expiresAt).toISOString(),
      });
    },
  );

  app.post(
    '/sign-out',
    { config: { dashboard: 'viewer' }, schema: { hide: true } },
    async (request, reply) => {
      await auth.signOut(request.cookies[SESSION_COOKIE]);
      reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
      return ok({ details: 'Signed out' });
    },
  );

  app.post(
    '/password',
    { config: { dashboard: 'viewer' }, schema: { hide: true, body: PasswordBody } },
    async (request) => {
      await auth.changePassword(
        principalOf(request),
        request.cookies[SESSION_COOKIE] ?? '',
        request.body,
        request.ip,
      );
      return ok({ details: 'Password changed; your other sessions were signed out' });
    },
  );

  app.get('/me', { config: { dashboard: 'viewer' }, schema: { hide: true } }, async (request) => {
    const { user, org, csrfToken, expiresAt } = principalOf(request);
    return ok({
      user,
      org: { id: org.id, name: org.name, plan: org.plan },
      csrfToken,
      expiresAt: new Date(expiresAt).toISOString(),
    });
  });

  app.get('/usage', { config: { dashboard: 'viewer' }, schema: { hide: true } }, async (request) => {
    return ok(await dashboard.usage(principalOf(request).org));
  });
}
