import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { ok } from '../../schemas.ts';
import { BlockBody, PROFILE_BODY_LIMIT, ProfileBody, profileChangeOf, profileView } from '../v1/profile.ts';
import { InstanceParams, instanceFor } from './instances.ts';

/**
 * The account's profile and blocklist of an instance on the dashboard (docs/decisions/0039-profile-privacy-blocklist.md,
 * docs/decisions/0022-dashboard.md): read the profile and the blocklist (viewer), change the name, about text or
 * picture, block and unblock (member, with the CSRF token, guard.ts), through the ProfileService of `/v1/profile` and
 * `/v1/contacts/block*`, so the rules, limits and errors are the API's (docs/api.md#profile). Another organization's
 * instance answers 404 `instance not found`. Every route is under `/instances/:id`, so on several nodes it runs on the
 * node holding the instance's session (routing.ts).
 */
export async function profileRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const { profile } = services.app;
  const viewer = { dashboard: 'viewer' } as const;
  const member = { dashboard: 'member' } as const;
  const params = InstanceParams;

  app.get('/instances/:id/profile', { config: viewer, schema: { hide: true, params } }, async (request) =>
    ok(profileView(await profile.profile(await instanceFor(app, request)))),
  );

  app.put(
    '/instances/:id/profile',
    { config: member, bodyLimit: PROFILE_BODY_LIMIT, schema: { hide: true, params, body: ProfileBody } },
    async (request) => {
      const instance = await instanceFor(app, request);
      const change = await profileChangeOf(services.guard, request.body, request.log);
      return ok(profileView(await profile.updateProfile(instance, change)));
    },
  );

  app.get('/instances/:id/blocklist', { config: viewer, schema: { hide: true, params } }, async (request) =>
    ok({ phones: await profile.blocklist(await instanceFor(app, request)) }),
  );

  for (const action of ['block', 'unblock'] as const) {
    app.post(
      `/instances/:id/${action}`,
      { config: member, schema: { hide: true, params, body: BlockBody } },
      async (request) =>
        ok({
          phones: await profile.setBlocked(await instanceFor(app, request), request.body.phone, action),
        }),
    );
  }
}
