import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import { checkGroupChange } from '../../../domain/groups.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';
import { GroupUpdateBody } from './group-admin.ts';
import { GroupDetails, MAX_PARTICIPANTS, toGroupDetails } from './groups.ts';

const MEMBER_ACTIONS = ['add', 'remove', 'promote', 'demote', 'join', 'leave'] as const;

/** Body of `POST /v1/sandbox/groups/participants` (docs/decisions/0004-sandbox.md). */
export const SandboxParticipantsBody = Type.Object(
  {
    groupJid: GroupUpdateBody.properties.groupJid,
    phone: Phone('the simulated member who acts (for join: the user who joins by link)'),
    action: Type.Unsafe<(typeof MEMBER_ACTIONS)[number]>({
      type: 'string',
      enum: [...MEMBER_ACTIONS],
      'x-message': `{field} must be one of ${MEMBER_ACTIONS.join(', ')}`,
      description:
        'add, remove, promote, demote participants (phone must be an admin); join or leave (phone itself)',
      examples: ['add'],
    }),
    participants: Type.Optional(
      Type.Array(Phone('a participant'), {
        minItems: 1,
        maxItems: MAX_PARTICIPANTS,
        description: 'the numbers acted on (add, remove, promote, demote)',
        examples: [['5511966665555']],
      }),
    ),
  },
  { title: 'SandboxParticipantsBody' },
);

/**
 * Body of `POST /v1/sandbox/groups/update` (docs/decisions/0004-sandbox.md): the fields of `POST /v1/groups/update`
 * plus the actor.
 */
export const SandboxGroupUpdateBody = Type.Object(
  { ...GroupUpdateBody.properties, phone: Phone('the simulated member who makes the change') },
  { title: 'SandboxGroupUpdateBody' },
);

const tags = ['sandbox'];

/**
 * `/v1/sandbox/groups/*` helpers (docs/decisions/0004-sandbox.md): a simulated member changes a group the instance is
 * in, and the GroupUpdate events follow as on the platform. Test keys only, scope `chat:session`
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export async function sandboxGroupRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;
  const config = { scope: 'chat:session', testOnly: true, instance: 'query' } as const;

  app.post(
    '/groups/participants',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxGroupParticipants',
        summary: 'A simulated member adds, removes, promotes or demotes participants, or joins or leaves',
        querystring: InstanceQuery,
        body: SandboxParticipantsBody,
        response: responses('The group after the change', GroupDetails, 409, 422),
      },
    },
    async (request) => {
      const { groupJid, phone, action, participants } = request.body;
      const needsList = action !== 'join' && action !== 'leave';
      if (needsList && participants === undefined) {
        throw errors.badRequest(`participants is required with action ${action}`);
      }
      // A number given twice is acted on once, as POST /v1/groups/participants does: one GroupUpdate names it once.
      const group = await sandbox.groupChange(instanceOf(request), {
        groupJid,
        phone,
        action,
        ...(needsList && participants ? { participants: [...new Set(participants)] } : {}),
      });
      return ok(toGroupDetails(group));
    },
  );

  app.post(
    '/groups/update',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxGroupUpdate',
        summary: 'A simulated member changes the name, topic or settings of a group',
        querystring: InstanceQuery,
        body: SandboxGroupUpdateBody,
        response: responses('The group after the change', GroupDetails, 409, 422),
      },
    },
    async (request) => {
      const { groupJid, phone, ...change } = request.body;
      if (Object.values(change).every((v) => v === undefined)) {
        throw errors.badRequest('give at least one of name, topic, announce, locked, disappearingTimer');
      }
      checkGroupChange(change);
      return ok(
        toGroupDetails(await sandbox.groupChange(instanceOf(request), { groupJid, phone, ...change })),
      );
    },
  );
}
