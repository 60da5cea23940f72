import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { qrCodeDataUrl } from '../../qr-code.ts';
import { Details, EventTypeName, InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/** Body of `POST /v1/session/connect` (docs/api.md#session; docs/decisions/0016-session-lifecycle.md). */
export const ConnectBody = Type.Object(
  {
    subscribe: Type.Optional(
      // No cap on the count: any of the types may be named (duplicates are dropped), and an unknown one is
      // answered by name, whatever its position.
      Type.Array(EventTypeName, {
        description:
          'event types to receive (any of the types parley emits); omitted on the first connect: Message, ReadReceipt, HistorySync and ChatPresence; later: the stored list',
        examples: [['Message', 'ReadReceipt']],
      }),
    ),
    immediate: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'false: with a stored session, wait up to 10 s for login to be verified',
      }),
    ),
  },
  { title: 'ConnectBody' },
);
export type ConnectBody = Static<typeof ConnectBody>;

/** Connect result (docs/api.md#session). */
export const ConnectResult = Type.Object(
  {
    details: Type.String({ examples: ['Connected!'] }),
    events: Type.String({ examples: ['Message,ReadReceipt,HistorySync,ChatPresence'] }),
    jid: Type.String({
      description: 'the account JID when logged in, else empty',
      examples: ['5511999990000.0:1@s.whatsapp.net'],
    }),
    webhook: Type.String({ description: 'configured webhook URL, else empty' }),
  },
  { title: 'ConnectResult' },
);
export type ConnectResult = Static<typeof ConnectResult>;

/** Session status (docs/api.md#session, docs/decisions/0016-session-lifecycle.md). */
export const SessionStatus = Type.Object(
  {
    connected: Type.Boolean(),
    loggedIn: Type.Boolean(),
    jid: Type.Optional(Type.String()),
    instanceId: Type.String({ format: 'uuid' }),
    env: Type.Union([Type.Literal('test'), Type.Literal('live')]),
    reason: Type.Optional(Type.String({ description: 'why the connection last stopped, when known' })),
    paused: Type.Optional(
      Type.Object(
        {
          reason: Type.String({ description: "the platform's restriction signal" }),
          until: Type.String({ format: 'date-time', description: 'when sending resumes' }),
        },
        { description: 'present while a platform restriction pauses the send queue' },
      ),
    ),
    pendingSends: Type.Optional(
      Type.Integer({
        minimum: 1,
        description:
          'sends accepted and due that have not gone out yet (queued, scheduled and due, synchronous ones waiting ' +
          'their turn); present when there are any. They wait for the connection: connect relays them, logout ' +
          'cancels them',
      }),
    ),
  },
  { title: 'SessionStatus' },
);
export type SessionStatus = Static<typeof SessionStatus>;

/**
 * QR code (docs/decisions/0016-session-lifecycle.md): a PNG data URI encoding `code`, the raw pairing string, and its
 * expiry (RFC 3339).
 */
export const QrResult = Type.Object(
  {
    qrCode: Type.String({ description: 'data:image/png;base64,…' }),
    code: Type.String({ description: 'raw pairing string encoded by the PNG' }),
    expiresAt: Type.String({ format: 'date-time' }),
  },
  { title: 'QrResult' },
);
export type QrResult = Static<typeof QrResult>;

/** Body of `POST /v1/session/pairing-code`: the phone number of the account being linked. */
export const PairingCodeBody = Type.Object(
  {
    phone: Phone('the number of the phone that will type the code'),
  },
  { title: 'PairingCodeBody' },
);
export type PairingCodeBody = Static<typeof PairingCodeBody>;

/**
 * Body of `POST /v1/session/hmac/config` (docs/api.md#session; docs/decisions/0016-session-lifecycle.md,
 * docs/decisions/0020-security-promises.md).
 */
export const HmacBody = Type.Object(
  {
    hmacKey: Type.String({
      minLength: 32,
      maxLength: 512,
      description: 'secret used to sign webhooks (at least 32 characters)',
    }),
  },
  { title: 'HmacBody' },
);
export type HmacBody = Static<typeof HmacBody>;

const tags = ['session'];

/**
 * `/v1/session/*` (docs/api.md#session, docs/decisions/0016-session-lifecycle.md); scope `chat:session`
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export async function sessionRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { session, pacing } = app.services.app;
  const config = { scope: 'chat:session', instance: 'query' } as const;

  app.post(
    '/connect',
    {
      config,
      schema: {
        tags,
        operationId: 'connectSession',
        summary: 'Connect the instance (starts pairing when no session is stored)',
        querystring: InstanceQuery,
        body: ConnectBody,
        response: responses(
          'Connected, or pairing started: the connection state, subscribed events, account JID and webhook',
          ConnectResult,
          409,
          502,
          503,
          504,
        ),
      },
    },
    async (request) => {
      const body = request.body;
      const result = await session.connect(instanceOf(request), {
        ...(body.subscribe ? { subscribe: [...new Set(body.subscribe)] } : {}),
        immediate: body.immediate ?? true,
      });
      return ok(result);
    },
  );

  app.get(
    '/status',
    {
      config,
      schema: {
        tags,
        operationId: 'getSessionStatus',
        summary: 'Session status',
        querystring: InstanceQuery,
        response: responses('Connection and login state of the instance', SessionStatus),
      },
    },
    async (request) => {
      const instance = instanceOf(request);
      const [status, pace, pendingSends] = await Promise.all([
        session.status(instance),
        pacing.get(instance),
        pacing.pendingSends(instance),
      ]);
      return ok({
        ...status,
        ...(pace.paused
          ? { paused: { reason: pace.paused.reason, until: new Date(pace.paused.until).toISOString() } }
          : {}),
        ...(pendingSends > 0 ? { pendingSends } : {}),
      });
    },
  );

  app.get(
    '/qr',
    {
      config,
      schema: {
        tags,
        operationId: 'getSessionQr',
        summary: 'Current pairing QR code (rotates: 60 s, then 20 s each, six codes)',
        querystring: InstanceQuery,
        response: responses(
          'The current QR code as a PNG data URI, its raw pairing string and its expiry',
          QrResult,
          409,
        ),
      },
    },
    async (request) => {
      const pairing = await session.pairingCode(instanceOf(request));
      const qrCode = await qrCodeDataUrl(pairing.code);
      return ok({ qrCode, code: pairing.code, expiresAt: new Date(pairing.expiresAt).toISOString() });
    },
  );

  app.post(
    '/pairing-code',
    {
      config,
      schema: {
        tags,
        operationId: 'requestPairingCode',
        summary: 'Link by an 8-character code typed on the phone instead of scanning the QR (live instances)',
        querystring: InstanceQuery,
        body: PairingCodeBody,
        response: responses(
          'The pairing code to type on the phone',
          Type.Object({ code: Type.String({ examples: ['ABCD1234'] }) }),
          409,
          502,
          503,
        ),
      },
    },
    async (request) =>
      ok({ code: await session.requestPairingCode(instanceOf(request), request.body.phone) }),
  );

  app.post(
    '/disconnect',
    {
      config,
      schema: {
        tags,
        operationId: 'disconnectSession',
        summary: 'Disconnect, keeping the session',
        querystring: InstanceQuery,
        response: responses('Disconnected; the stored session is kept', Details),
      },
    },
    async (request) => {
      await session.disconnect(instanceOf(request));
      return ok({ details: 'Disconnected' });
    },
  );

  app.post(
    '/logout',
    {
      config,
      schema: {
        tags,
        operationId: 'logoutSession',
        summary: 'Log out and unlink the device',
        querystring: InstanceQuery,
        response: responses('Logged out; the device is unlinked', Details),
      },
    },
    async (request) => {
      await session.logout(instanceOf(request));
      return ok({ details: 'Logged out' });
    },
  );

  app.post(
    '/hmac/config',
    {
      config,
      schema: {
        tags,
        operationId: 'setHmacKey',
        summary: 'Set the HMAC key that signs webhooks (never returned again)',
        querystring: InstanceQuery,
        body: HmacBody,
        response: responses('HMAC key stored', Details),
      },
    },
    async (request) => {
      await session.setHmacKey(instanceOf(request), request.body.hmacKey);
      return ok({ details: 'HMAC key configured' });
    },
  );

  app.get(
    '/hmac/config',
    {
      config,
      schema: {
        tags,
        operationId: 'getHmacKeyStatus',
        summary: 'Whether an HMAC key is configured',
        querystring: InstanceQuery,
        response: responses('Whether an HMAC key is configured', Type.Object({ configured: Type.Boolean() })),
      },
    },
    async (request) => ok({ configured: await session.hasHmacKey(instanceOf(request)) }),
  );

  app.delete(
    '/hmac/config',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteHmacKey',
        summary: 'Remove the HMAC key',
        querystring: InstanceQuery,
        response: responses('HMAC key removed', Details),
      },
    },
    async (request) => {
      await session.removeHmacKey(instanceOf(request));
      return ok({ details: 'HMAC key removed' });
    },
  );
}
