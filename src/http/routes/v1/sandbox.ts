import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, InstanceQuery, ok, Phone, responses } from '../../schemas.ts';
import { GroupDetails, toGroupDetails } from './groups.ts';
import { sandboxUpdateRoutes } from './sandbox-updates.ts';

/** Body of `POST /v1/sandbox/scan` (docs/decisions/0004-sandbox.md). */
export const ScanBody = Type.Object(
  {
    code: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        description: 'must equal the current QR code when given (GET /v1/session/qr → code)',
        examples: ['2@Yl3x…,K7f…,Qm9…,c2Vj…'],
      }),
    ),
    phone: Type.Optional(Phone('the number the simulated owner logs in as; generated when omitted')),
  },
  { title: 'ScanBody' },
);
export type ScanBody = Static<typeof ScanBody>;

/**
 * A string from a closed list; the 400 names the field and every allowed value
 * (docs/decisions/0001-envelope-and-error-codes.md).
 */
export function StringEnum<T extends string>(values: readonly T[], example: T) {
  return Type.Unsafe<T>({
    type: 'string',
    enum: [...values],
    'x-message': `{field} must be one of ${values.join(', ')}`,
    examples: [example],
  });
}

/** A group JID (docs/api.md#conventions): `<digits>@g.us`, or `<digits>-<digits>@g.us` for old groups. */
export const GroupJid = Type.String({
  pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$',
  'x-message': '{field} must be a group JID: <digits>@g.us',
  examples: ['120363025246125486@g.us'],
});

/** Body of `POST /v1/sandbox/inbound` (docs/decisions/0004-sandbox.md). */
export const InboundBody = Type.Object(
  {
    phone: Phone('the simulated user the message comes from'),
    body: Type.String({ minLength: 1, maxLength: 65_536, examples: ['Hi! Is the shop open today?'] }),
    groupJid: Type.Optional({
      ...GroupJid,
      description: 'the group the message is sent in (instance must be a member)',
    }),
    pushName: Type.Optional(
      Type.String({
        maxLength: 200,
        description: "the sender's display name on this message",
        examples: ['Ana'],
      }),
    ),
  },
  { title: 'InboundBody' },
);
export type InboundBody = Static<typeof InboundBody>;

/** `data` of `POST /v1/sandbox/inbound`: the new message's id. */
export const InboundResult = Type.Object(
  {
    id: Type.String({ examples: ['3A6D5E0F9C1B2A3D4E5F60718293A4B5'] }),
  },
  { title: 'InboundResult' },
);
export type InboundResult = Static<typeof InboundResult>;

/**
 * Body of `POST /v1/sandbox/receipt` (docs/decisions/0004-sandbox.md); `phone` picks the acknowledging member of a
 * group chat.
 */
export const ReceiptBody = Type.Object(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 128,
      description: 'id of a message this instance sent',
      examples: ['3EB0C767D26A1D2E5B3A61'],
    }),
    state: StringEnum(['delivered', 'read', 'played'] as const, 'read'),
    phone: Type.Optional(
      Phone(
        'group chats: the member acknowledging (default: the first other member); statuses: the contact viewing it (default: the first recipient)',
      ),
    ),
  },
  { title: 'ReceiptBody' },
);
export type ReceiptBody = Static<typeof ReceiptBody>;

/**
 * Body of `POST /v1/sandbox/presence` (docs/decisions/0004-sandbox.md): `recording` is composing with media `audio`
 * (docs/decisions/0018-webhook-events-and-payloads.md).
 */
export const PresenceBody = Type.Object(
  {
    phone: Phone('the simulated user'),
    state: StringEnum(['composing', 'recording', 'paused'] as const, 'composing'),
    groupJid: Type.Optional({ ...GroupJid, description: 'the group the user is typing in' }),
  },
  { title: 'PresenceBody' },
);
export type PresenceBody = Static<typeof PresenceBody>;

const Name = (example: string) => Type.Optional(Type.String({ maxLength: 200, examples: [example] }));

/**
 * Body of `POST /v1/sandbox/users` (docs/decisions/0004-sandbox.md): omitted fields take the default world's values.
 */
export const UserBody = Type.Object(
  {
    phone: Phone('the user to define'),
    registered: Type.Optional(
      Type.Boolean({ description: 'default: true unless the number ends in 0000', examples: [true] }),
    ),
    pushName: Name('Ana'),
    firstName: Name('Ana'),
    fullName: Name('Ana Souza'),
    businessName: Name('Ana Bakery'),
    verifiedName: Name('Ana Bakery Ltd.'),
  },
  { title: 'UserBody' },
);
export type UserBody = Static<typeof UserBody>;

/**
 * Body of `POST /v1/sandbox/groups` (docs/decisions/0004-sandbox.md; docs/decisions/0020-security-promises.md: at
 * most 256 participants).
 */
export const SandboxGroupBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 25, examples: ['Book club'] }),
    ownerPhone: Phone('the simulated user who creates the group (owner, admin, super admin)'),
    participants: Type.Array(Phone('a member'), {
      maxItems: 256,
      description: 'other members; this instance is added as a plain member',
      examples: [['5511999990002']],
    }),
  },
  { title: 'SandboxGroupBody' },
);
export type SandboxGroupBody = Static<typeof SandboxGroupBody>;

const tags = ['sandbox'];

/**
 * `/v1/sandbox/*` test helpers (docs/decisions/0004-sandbox.md): only for `svc_test_` keys (a live key gets 404),
 * scope `chat:session` (docs/decisions/0003-scopes-and-keys.md).
 */
export async function sandboxRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;
  const config = { scope: 'chat:session', testOnly: true, instance: 'query' } as const;

  app.post(
    '/scan',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxScan',
        summary: 'The simulated account owner scans the current QR code; a HistorySync event follows',
        querystring: InstanceQuery,
        body: ScanBody,
        response: responses('Logged in as the simulated account', Details, 409),
      },
    },
    async (request) => {
      const { code, phone } = request.body;
      const linked = await sandbox.scan(instanceOf(request), {
        ...(code === undefined ? {} : { code }),
        ...(phone === undefined ? {} : { phone }),
      });
      return ok({ details: `Logged in as ${linked}` });
    },
  );

  app.post(
    '/inbound',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxInbound',
        summary: 'A message arrives from a simulated user (in a group when groupJid is given): Message event',
        querystring: InstanceQuery,
        body: InboundBody,
        response: responses('The message was delivered to the instance; its id', InboundResult, 409, 422),
      },
    },
    async (request) => {
      const { phone, body, groupJid, pushName } = request.body;
      const sent = await sandbox.inbound(instanceOf(request), {
        phone,
        body,
        ...(groupJid === undefined ? {} : { groupJid }),
        ...(pushName === undefined ? {} : { pushName }),
      });
      return ok({ id: sent.id });
    },
  );

  app.post(
    '/receipt',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxReceipt',
        summary: 'The recipient of a sent message acknowledges it: ReadReceipt event',
        querystring: InstanceQuery,
        body: ReceiptBody,
        response: responses('Receipt sent', Details, 409, 422),
      },
    },
    async (request) => {
      const { id, state, phone } = request.body;
      await sandbox.receipt(instanceOf(request), {
        id,
        state,
        ...(phone === undefined ? {} : { phone }),
      });
      return ok({ details: `Receipt ${state} sent` });
    },
  );

  app.post(
    '/presence',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxPresence',
        summary: 'A simulated user is typing, recording audio or paused: ChatPresence event',
        querystring: InstanceQuery,
        body: PresenceBody,
        response: responses('Presence sent', Details, 409, 422),
      },
    },
    async (request) => {
      const { phone, state, groupJid } = request.body;
      await sandbox.presence(instanceOf(request), {
        phone,
        state,
        ...(groupJid === undefined ? {} : { groupJid }),
      });
      return ok({ details: `Presence ${state} sent` });
    },
  );

  app.post(
    '/users',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxDefineUser',
        summary: 'Define (replace) a user of the simulated platform: registration and names',
        querystring: InstanceQuery,
        body: UserBody,
        response: responses('User defined', Details),
      },
    },
    async (request) => {
      await sandbox.defineUser(instanceOf(request), request.body);
      return ok({ details: `User ${request.body.phone} defined` });
    },
  );

  app.post(
    '/groups',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxCreateGroup',
        summary: 'A group created by another user that includes this instance as a plain member',
        querystring: InstanceQuery,
        body: SandboxGroupBody,
        response: responses('The group as the instance sees it', GroupDetails, 409, 422),
      },
    },
    async (request) => {
      const group = await sandbox.createForeignGroup(instanceOf(request), request.body);
      return ok(toGroupDetails(group));
    },
  );

  await app.register(sandboxUpdateRoutes);
}
