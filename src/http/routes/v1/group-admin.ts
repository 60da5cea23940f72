import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import {
  DISAPPEARING_TIMERS,
  inviteCodeOf,
  MAX_GROUP_TOPIC,
  type ParticipantAction,
  participantStatus,
} from '../../../domain/groups.ts';
import { userJid } from '../../../domain/messages.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, InstanceQuery, ok, Phone, responses } from '../../schemas.ts';
import {
  GroupDetails,
  GroupJid,
  InviteLink,
  MAX_GROUP_NAME,
  MAX_PARTICIPANTS,
  toGroupDetails,
} from './groups.ts';

/**
 * A string from a closed list; the 400 names the field and every allowed value
 * (docs/decisions/0001-envelope-and-error-codes.md).
 */
function StringEnum<T extends string>(values: readonly T[], example: T, description: string) {
  return Type.Unsafe<T>({
    type: 'string',
    enum: [...values],
    'x-message': `{field} must be one of ${values.join(', ')}`,
    description,
    examples: [example],
  });
}

const ACTIONS = ['add', 'remove', 'promote', 'demote'] as const satisfies readonly ParticipantAction[];

/** Body of `POST /v1/groups/participants`. */
export const ParticipantsBody = Type.Object(
  {
    groupJid: GroupJid,
    action: StringEnum(ACTIONS, 'add', 'what to do with the participants'),
    participants: Type.Array(Phone('a participant'), {
      minItems: 1,
      maxItems: MAX_PARTICIPANTS,
      description: `numbers to act on, 1 to ${MAX_PARTICIPANTS}`,
      examples: [['5511977776666']],
    }),
  },
  { title: 'ParticipantsBody' },
);
export type ParticipantsBody = Static<typeof ParticipantsBody>;

/** One participant's result in the answer of `POST /v1/groups/participants`. */
export const ParticipantResult = Type.Object(
  {
    phone: Type.String({ examples: ['5511977776666'] }),
    status: Type.String({
      description:
        'added, removed, promoted, demoted, or why not: invite-required (the user only accepts invitations), ' +
        'not-registered, not-in-group, already-in-group, recently-left, not-allowed (the group creator), ' +
        'group-full, refused',
      examples: ['added'],
    }),
    code: Type.Integer({
      description: "the platform's code for this participant (200 when done)",
      examples: [200],
    }),
  },
  { title: 'ParticipantResult' },
);

/** Body of `POST /v1/groups/update`: at least one field besides `groupJid`. */
export const GroupUpdateBody = Type.Object(
  {
    groupJid: GroupJid,
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_GROUP_NAME,
        description: `new group name, at most ${MAX_GROUP_NAME} characters`,
        examples: ['Shop team 2026'],
      }),
    ),
    topic: Type.Optional(
      Type.String({
        maxLength: MAX_GROUP_TOPIC,
        description: `new description, at most ${MAX_GROUP_TOPIC} characters; "" removes it`,
        examples: ['Orders and shifts'],
      }),
    ),
    announce: Type.Optional(Type.Boolean({ description: 'only admins may send messages' })),
    locked: Type.Optional(Type.Boolean({ description: 'only admins may edit the group info' })),
    disappearingTimer: Type.Optional(
      Type.Integer({
        description: `disappearing-message timer in seconds: ${DISAPPEARING_TIMERS.join(', ')} (off, 24 hours, 7 days, 90 days)`,
        examples: [604800],
      }),
    ),
  },
  { title: 'GroupUpdateBody' },
);
export type GroupUpdateBody = Static<typeof GroupUpdateBody>;

/** Body of the operations that name only a group. */
export const GroupBody = Type.Object({ groupJid: GroupJid }, { title: 'GroupBody' });

/** Body of `POST /v1/groups/join`. */
export const JoinBody = Type.Object(
  {
    inviteLink: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'an invite link (https://chat.whatsapp.com/CODE) or its bare code',
      examples: ['https://chat.whatsapp.com/AbCdEfGhIjK1234567890'],
    }),
  },
  { title: 'JoinBody' },
);

const tags = ['groups'];

/**
 * Group administration under `/v1/groups` (participants, settings, leave, join, revoke): scope `chat:groups`,
 * the instance by query `from` or `x-instance-id` (docs/decisions/0002-instance-resolution.md,
 * docs/decisions/0003-scopes-and-keys.md). Changes need the account to be a group admin where the platform says so
 * (403 with the reason otherwise).
 */
export async function groupAdminRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { config: appConfig } = app.services;
  const { groups } = app.services.app;
  const config = { scope: 'chat:groups', instance: 'query' } as const;

  app.post(
    '/participants',
    {
      config,
      schema: {
        tags,
        operationId: 'updateGroupParticipants',
        summary: 'Add, remove, promote or demote participants (the caller must be a group admin)',
        description: 'Answers one result per number, in order: the platform decides per participant.',
        querystring: InstanceQuery,
        body: ParticipantsBody,
        response: responses(
          'One result per participant',
          Type.Object({ participants: Type.Array(ParticipantResult) }),
          409,
          502,
          503,
        ),
      },
    },
    async (request) => {
      const { groupJid, action } = request.body;
      const phones = [...new Set(request.body.participants)];
      const outcomes = await groups.updateParticipants(
        instanceOf(request),
        groupJid,
        action,
        phones.map(userJid),
      );
      return ok({
        participants: outcomes.map((o, i) => ({
          phone: phones[i] ?? '',
          status: participantStatus(action, o.code),
          code: o.code,
        })),
      });
    },
  );

  app.post(
    '/update',
    {
      config,
      schema: {
        tags,
        operationId: 'updateGroup',
        summary: 'Change the name, topic, announce, locked or disappearing-timer setting of a group',
        description:
          'Announce and locked need a group admin; name, topic and timer need one while the group is locked.',
        querystring: InstanceQuery,
        body: GroupUpdateBody,
        response: responses('The group with every field, after the change', GroupDetails, 409, 502, 503),
      },
    },
    async (request) => {
      const { groupJid, ...change } = request.body;
      if (Object.values(change).every((v) => v === undefined)) {
        throw errors.badRequest('give at least one of name, topic, announce, locked, disappearingTimer');
      }
      return ok(toGroupDetails(await groups.update(instanceOf(request), groupJid, change)));
    },
  );

  app.post(
    '/leave',
    {
      config,
      schema: {
        tags,
        operationId: 'leaveGroup',
        summary: 'Leave a group',
        querystring: InstanceQuery,
        body: GroupBody,
        response: responses('Left the group', Details, 409, 502, 503),
      },
    },
    async (request) => {
      await groups.leave(instanceOf(request), request.body.groupJid);
      return ok({ details: 'Left the group' });
    },
  );

  app.post(
    '/join',
    {
      config,
      schema: {
        tags,
        operationId: 'joinGroup',
        summary: 'Join a group by its invite link',
        querystring: InstanceQuery,
        body: JoinBody,
        response: responses(
          'The group joined',
          Type.Object({ groupJid: Type.String({ examples: ['120363025246125486@g.us'] }) }),
          409,
          502,
          503,
        ),
      },
    },
    async (request) => {
      const code = inviteCodeOf(request.body.inviteLink);
      if (code === null) {
        throw errors.badRequest(
          'inviteLink must be an invite link (https://chat.whatsapp.com/CODE) or its code',
        );
      }
      return ok({ groupJid: await groups.join(instanceOf(request), code) });
    },
  );

  app.post(
    '/invite-link/revoke',
    {
      config,
      schema: {
        tags,
        operationId: 'revokeGroupInviteLink',
        summary: 'Revoke the invite link of a group and get the new one (the caller must be a group admin)',
        querystring: InstanceQuery,
        body: GroupBody,
        response: responses('The new invite link', InviteLink, 409, 502, 503),
      },
    },
    async (request) => {
      const code = await groups.revokeInvite(instanceOf(request), request.body.groupJid);
      return ok({ inviteLink: `${appConfig.inviteBaseUrl}${code}` });
    },
  );
}
