import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { MAX_INSTANCE_NAME } from '../../../app/instances.ts';
import type { Instance } from '../../../domain/instance.ts';
import { authOf } from '../../plugins/auth.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { created, createdResponses, ok, responses } from '../../schemas.ts';

/**
 * An instance as `/v1/instances` shows it (docs/api.md#instances, docs/decisions/0029-instances-over-the-api.md):
 * identity, environment, the linked number and webhook URL; times RFC 3339. Its connection state is
 * `GET /v1/session/status?from=<id>`.
 */
export const InstanceView = Type.Object(
  {
    id: Type.String({ format: 'uuid', examples: ['0b9a3c55-6a44-4c7c-9a57-3f0f5d0e8f11'] }),
    name: Type.String({ examples: ['sales'] }),
    env: Type.Union([Type.Literal('test'), Type.Literal('live')], {
      description: "the key's environment: test (the sandbox) or live",
    }),
    phone: Type.Union([Type.String(), Type.Null()], {
      description: 'the linked phone number, digits only; null until linked and after a logout',
      examples: ['5511999990001'],
    }),
    webhook: Type.Union([Type.String(), Type.Null()], {
      description: 'the webhook URL, null when none is set',
    }),
    lastConnectedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'the latest successful connect, null before the first',
    }),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { title: 'InstanceView' },
);
export type InstanceView = Static<typeof InstanceView>;

/** `data` of `GET /v1/instances`: the instances the key may address, oldest first. */
export const InstanceList = Type.Object({ instances: Type.Array(InstanceView) }, { title: 'InstanceList' });
export type InstanceList = Static<typeof InstanceList>;

/** The instance name rule of the body fields (the service trims it and checks it again). */
const InstanceName = Type.String({
  minLength: 1,
  maxLength: MAX_INSTANCE_NAME,
  description: `display name, 1 to ${MAX_INSTANCE_NAME} characters (trimmed)`,
  examples: ['sales'],
});

/** Body of `POST /v1/instances`. */
export const CreateInstanceBody = Type.Object({ name: InstanceName }, { title: 'CreateInstanceBody' });
export type CreateInstanceBody = Static<typeof CreateInstanceBody>;

/** Body of `PATCH /v1/instances/{id}`: the one field that may change. */
export const UpdateInstanceBody = Type.Object({ name: InstanceName }, { title: 'UpdateInstanceBody' });
export type UpdateInstanceBody = Static<typeof UpdateInstanceBody>;

/** `:id` of `/v1/instances/{id}`: any text; what is not an addressable instance UUID is 404. */
export const InstanceIdParams = Type.Object({
  id: Type.String({ maxLength: 100, description: 'the instance UUID' }),
});
export type InstanceIdParams = Static<typeof InstanceIdParams>;

/** `data` of `DELETE /v1/instances/{id}`. */
export const DeletedInstance = Type.Object(
  { details: Type.Literal('Instance deleted'), id: Type.String({ format: 'uuid' }) },
  { title: 'DeletedInstance' },
);
export type DeletedInstance = Static<typeof DeletedInstance>;

/** The view of a stored instance. */
export function instanceView(instance: Instance): InstanceView {
  return {
    id: instance.id,
    name: instance.name,
    env: instance.env,
    phone: instance.phone,
    webhook: instance.webhookUrl,
    lastConnectedAt: instance.lastConnectedAt,
    createdAt: instance.createdAt,
  };
}

const tags = ['instances'];

/**
 * `/v1/instances` (docs/api.md#instances, docs/decisions/0029-instances-over-the-api.md): list, create, read,
 * rename and delete the instances of the key's organization, in the key's environment; scope `instances:manage`
 * (not part of `chat:*`). `{id}` routes resolve the instance through the instance plugin (`instance: 'path'`), so an
 * instance the key may not address is 404 and, on several nodes, the request runs on the node holding its session.
 */
export async function instancesRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { instances } = app.services.app;
  const scope = { scope: 'instances:manage' } as const;
  const byId = { scope: 'instances:manage', instance: 'path' } as const;

  app.get(
    '',
    {
      config: scope,
      schema: {
        tags,
        operationId: 'listInstances',
        summary: "The instances this key may address (its organization's, in its environment)",
        response: responses('The instances, oldest first', InstanceList),
      },
    },
    async (request) => ok({ instances: (await instances.list(authOf(request))).map(instanceView) }),
  );

  app.post(
    '',
    {
      config: scope,
      schema: {
        tags,
        operationId: 'createInstance',
        summary: "Create an instance in the key's organization and environment, within the plan's cap",
        body: CreateInstanceBody,
        response: createdResponses('The instance created', InstanceView),
      },
    },
    async (request, reply) => {
      const instance = await instances.create(authOf(request), request.body.name);
      reply.code(201);
      return created(instanceView(instance));
    },
  );

  app.get(
    '/:id',
    {
      config: byId,
      schema: {
        tags,
        operationId: 'getInstance',
        summary: 'One instance',
        params: InstanceIdParams,
        response: responses('The instance', InstanceView),
      },
    },
    async (request) => ok(instanceView(instanceOf(request))),
  );

  app.patch(
    '/:id',
    {
      config: byId,
      schema: {
        tags,
        operationId: 'updateInstance',
        summary: 'Rename an instance',
        params: InstanceIdParams,
        body: UpdateInstanceBody,
        response: responses('The instance as it is now', InstanceView),
      },
    },
    async (request) => ok(instanceView(await instances.rename(instanceOf(request), request.body.name))),
  );

  app.delete(
    '/:id',
    {
      config: byId,
      schema: {
        tags,
        operationId: 'deleteInstance',
        summary: 'Delete an instance and all its data (its session is logged out first)',
        params: InstanceIdParams,
        response: responses('The instance and its data are deleted', DeletedInstance, 502, 503),
      },
    },
    async (request) => {
      const instance = instanceOf(request);
      await instances.remove(instance);
      return ok({ details: 'Instance deleted' as const, id: instance.id });
    },
  );
}
