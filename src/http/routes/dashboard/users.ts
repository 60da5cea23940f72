import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ok } from '../../schemas.ts';
import { principalOf } from './guard.ts';

const RoleName = Type.Unsafe<'owner' | 'member' | 'viewer'>({
  type: 'string',
  enum: ['owner', 'member', 'viewer'],
  'x-message': '{field} must be one of owner, member, viewer',
});
const CreateUserBody = Type.Object({
  email: Type.String({ minLength: 3, maxLength: 320 }),
  role: RoleName,
  password: Type.Optional(Type.String({ minLength: 12, maxLength: 1024 })),
});
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/** Users and roles of the signed-in user's organization (docs/decisions/0022-dashboard.md): owners only. */
export async function userRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const auth = app.services.app.dashboardAuth;
  const owner = { dashboard: 'owner' } as const;

  app.get('/users', { config: owner, schema: { hide: true } }, async (request) =>
    ok({ users: await auth.listUsers(principalOf(request).org.id) }),
  );

  app.post('/users', { config: owner, schema: { hide: true, body: CreateUserBody } }, async (request) => {
    const created = await auth.createUser(principalOf(request).org.id, request.body);
    return ok({ user: created.user, ...(created.generated ? { password: created.password } : {}) });
  });

  app.put(
    '/users/:id/role',
    { config: owner, schema: { hide: true, params: IdParams, body: Type.Object({ role: RoleName }) } },
    async (request) =>
      ok({ user: await auth.setRole(principalOf(request).org.id, request.params.id, request.body.role) }),
  );

  app.delete('/users/:id', { config: owner, schema: { hide: true, params: IdParams } }, async (request) => {
    await auth.removeUser(principalOf(request).org.id, request.params.id);
    return ok({ details: 'User removed' });
  });
}
