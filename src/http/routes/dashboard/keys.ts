import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { MAX_KEY_NAME } from '../../../app/api-keys.ts';
import { ok } from '../../schemas.ts';
import { principalOf } from './guard.ts';

const CreateKeyBody = Type.Object({
  env: Type.Unsafe<'test' | 'live'>({
    type: 'string',
    enum: ['test', 'live'],
    'x-message': '{field} must be one of test, live',
  }),
  name: Type.Optional(Type.String({ maxLength: MAX_KEY_NAME })),
  scopes: Type.Array(Type.String({ maxLength: 40 }), {
    minItems: 1,
    maxItems: 10,
    'x-message': '{field} must list 1 to 10 scopes',
  }),
  instances: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 100 })),
  expiresIn: Type.Optional(Type.String({ minLength: 2, maxLength: 12 })),
});
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/**
 * API keys of the signed-in user's organization (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0022-dashboard.md): list (prefix, scopes, last use), create (the full key is in this one answer
 * only) and revoke. Members and owners manage keys; viewers read the list. Only an owner creates a key with
 * `instances:manage` (it deletes instances, which members may not): 403 naming the scope.
 */
export async function keyRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const dashboard = app.services.app.dashboard;

  app.get('/keys', { config: { dashboard: 'viewer' }, schema: { hide: true } }, async (request) =>
    ok({ keys: await dashboard.keys(principalOf(request).org.id) }),
  );

  app.post(
    '/keys',
    { config: { dashboard: 'member' }, schema: { hide: true, body: CreateKeyBody } },
    async (request) => {
      const { org, user } = principalOf(request);
      return ok(await dashboard.createKey(org.id, request.body, user.role));
    },
  );

  app.post(
    '/keys/:id/revoke',
    { config: { dashboard: 'member' }, schema: { hide: true, params: IdParams } },
    async (request) => ok({ key: await dashboard.revokeKey(principalOf(request).org.id, request.params.id) }),
  );
}
