import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import type { GroupInfo } from '../../../domain/messages.ts';
import { userJid } from '../../../domain/messages.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/** Longest group name, characters (docs/api.md#groups). */
export const MAX_GROUP_NAME = 25;
/** Most participants one create may name (docs/decisions/0020-security-promises.md). */
export const MAX_PARTICIPANTS = 256;

/** A group JID: `<digits>@g.us`, or the older `<creator digits>-<digits>@g.us` (docs/api.md#conventions). */
export const GroupJid = Type.String({
  pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$',
  'x-message': '{field} must be a group JID: <digits>@g.us or <digits>-<digits>@g.us',
  description: 'group JID',
  examples: ['120363025246125486@g.us'],
});

const UserJid = Type.String({ description: 'user JID', examples: ['5511999990001@s.whatsapp.net'] });
const Timestamp = Type.String({ format: 'date-time', examples: ['2025-01-15T12:00:00.000Z'] });

/** A group participant (docs/api.md#groups). */
export const Participant = Type.Object(
  {
    jid: UserJid,
    isAdmin: Type.Boolean(),
    isSuperAdmin: Type.Boolean(),
  },
  { title: 'Participant' },
);

const groupFields = {
  jid: Type.String({ examples: ['120363025246125486@g.us'] }),
  name: Type.String({ examples: ['Team'] }),
  topic: Type.String({ description: 'the group description; empty when none', examples: [''] }),
  ownerJid: UserJid,
  groupCreated: Timestamp,
  nameSetAt: Timestamp,
  nameSetBy: UserJid,
  isAnnounce: Type.Boolean({ description: 'only admins may send messages' }),
  isLocked: Type.Boolean({ description: 'only admins may edit the group info' }),
  isEphemeral: Type.Boolean({ description: 'disappearing messages are on' }),
  disappearingTimer: Type.Integer({
    minimum: 0,
    description: 'disappearing-message timer in seconds; 0 when disabled',
    examples: [0],
  }),
  participants: Type.Array(Participant, { description: 'the creator appears as admin and super admin' }),
};
const { jid, name, ownerJid, groupCreated } = groupFields;
const { isAnnounce, isLocked, isEphemeral, disappearingTimer, participants } = groupFields;

/** Group, create fields (docs/api.md#groups, create fields). */
export const GroupCreated = Type.Object(
  { jid, name, ownerJid, groupCreated, participants },
  { title: 'GroupCreated' },
);
export type GroupCreated = Static<typeof GroupCreated>;

/** Group, list fields (docs/api.md#groups, list fields). */
export const GroupListed = Type.Object(
  {
    jid,
    name,
    ownerJid,
    groupCreated,
    isAnnounce,
    isLocked,
    isEphemeral,
    disappearingTimer,
    participants,
  },
  { title: 'GroupListed' },
);
export type GroupListed = Static<typeof GroupListed>;

/** Group, info fields: every field of docs/api.md#groups. */
export const GroupDetails = Type.Object(groupFields, { title: 'GroupDetails' });
export type GroupDetails = Static<typeof GroupDetails>;

/** Body of `POST /v1/groups/create` (docs/api.md#groups; docs/decisions/0020-security-promises.md). */
export const CreateGroupBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_GROUP_NAME,
      description: `group name, at most ${MAX_GROUP_NAME} characters`,
      examples: ['Team'],
    }),
    participants: Type.Array(Phone('a participant'), {
      minItems: 1,
      maxItems: MAX_PARTICIPANTS,
      description: `numbers to add, 1 to ${MAX_PARTICIPANTS}; the caller becomes owner and admin`,
      examples: [['5511999990002', '5511999990003']],
    }),
  },
  { title: 'CreateGroupBody' },
);
export type CreateGroupBody = Static<typeof CreateGroupBody>;

/** Query of the single-group operations: `groupJid` names the group. */
export const GroupQuery = Type.Object({ groupJid: GroupJid, from: InstanceQuery.properties.from });
export type GroupQuery = Static<typeof GroupQuery>;

/** `data` of `GET /v1/groups/invite-link`. */
export const InviteLink = Type.Object(
  {
    inviteLink: Type.String({ examples: ['https://chat.whatsapp.com/AbCdEfGhIjK1234567890'] }),
  },
  { title: 'InviteLink' },
);

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The info fields of `group` (docs/api.md#groups): times as RFC 3339 UTC, `disappearingTimer` in seconds. When the
 * platform reports no name change (`nameSetAt` 0, `nameSetBy` empty), the name dates from the creation by the
 * owner.
 */
export function toGroupDetails(group: GroupInfo): GroupDetails {
  return {
    jid: group.jid,
    name: group.name,
    topic: group.topic,
    ownerJid: group.ownerJid,
    groupCreated: iso(group.created),
    nameSetAt: iso(group.nameSetAt || group.created),
    nameSetBy: group.nameSetBy || group.ownerJid,
    isAnnounce: group.isAnnounce,
    isLocked: group.isLocked,
    isEphemeral: group.isEphemeral,
    disappearingTimer: group.disappearingTimer,
    participants: group.participants.map((p) => ({
      jid: p.jid,
      isAdmin: p.isAdmin,
      isSuperAdmin: p.isSuperAdmin,
    })),
  };
}

/** Fields of the list and create views (docs/api.md#groups: fields per operation). */
const LISTED_FIELDS = [
  'jid',
  'name',
  'ownerJid',
  'groupCreated',
  'isAnnounce',
  'isLocked',
  'isEphemeral',
  'disappearingTimer',
  'participants',
] as const satisfies readonly (keyof GroupListed)[];
const CREATED_FIELDS = [
  'jid',
  'name',
  'ownerJid',
  'groupCreated',
  'participants',
] as const satisfies readonly (keyof GroupCreated)[];

function pick<T extends object, K extends keyof T>(value: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const key of keys) out[key] = value[key];
  return out;
}

/** The list fields of `group` (docs/api.md#groups, list fields). */
export function toGroupListed(group: GroupInfo): GroupListed {
  return pick(toGroupDetails(group), LISTED_FIELDS);
}

/** The create fields of `group` (docs/api.md#groups, create fields). */
export function toGroupCreated(group: GroupInfo): GroupCreated {
  return pick(toGroupDetails(group), CREATED_FIELDS);
}

const tags = ['groups'];

/**
 * `/v1/groups/*` (docs/api.md#groups); scope `chat:groups` (docs/decisions/0003-scopes-and-keys.md), instance per
 * docs/decisions/0002-instance-resolution.md.
 */
export async function groupsRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { config: appConfig } = app.services;
  const { groups } = app.services.app;
  const config = { scope: 'chat:groups', instance: 'query' } as const;

  app.post(
    '/create',
    {
      config,
      schema: {
        tags,
        operationId: 'createGroup',
        summary: 'Create a group; the caller becomes owner, admin and super admin',
        querystring: InstanceQuery,
        body: CreateGroupBody,
        response: responses('The group created', GroupCreated, 409, 502, 503),
      },
    },
    async (request) => {
      const groupName = request.body.name;
      if (groupName.trim() === '') throw errors.badRequest('name must not be blank');
      // A number named twice is added once; the engine leaves out the account itself (it is the creator).
      const members = [...new Set(request.body.participants)].map(userJid);
      return ok(toGroupCreated(await groups.create(instanceOf(request), groupName, members)));
    },
  );

  app.get(
    '/list',
    {
      config,
      schema: {
        tags,
        operationId: 'listGroups',
        summary: 'Every group the account belongs to',
        querystring: InstanceQuery,
        response: responses(
          'The groups the account belongs to',
          Type.Object({ groups: Type.Array(GroupListed) }),
          409,
          502,
          503,
        ),
      },
    },
    async (request) => {
      const listed = await groups.list(instanceOf(request));
      return ok({ groups: listed.map(toGroupListed) });
    },
  );

  app.get(
    '/info',
    {
      config,
      schema: {
        tags,
        operationId: 'getGroupInfo',
        summary: 'One group with every field (404 when the account is not in it)',
        querystring: GroupQuery,
        response: responses('The group with every field', GroupDetails, 409, 502, 503),
      },
    },
    async (request) => {
      return ok(toGroupDetails(await groups.info(instanceOf(request), request.query.groupJid)));
    },
  );

  app.get(
    '/invite-link',
    {
      config,
      schema: {
        tags,
        operationId: 'getGroupInviteLink',
        summary: 'The invite link of a group (the caller must be a group admin)',
        querystring: GroupQuery,
        response: responses('The invite link', InviteLink, 409, 502, 503),
      },
    },
    async (request) => {
      const code = await groups.inviteCode(instanceOf(request), request.query.groupJid);
      return ok({ inviteLink: `${appConfig.inviteBaseUrl}${code}` });
    },
  );
}
