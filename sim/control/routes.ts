/**
 * Control API, part 1: users, scan and accounts (faults: control/faults.ts). JSON over HTTP under /control on the simulator's
 * port; errors in parley's envelope (control/errors.ts). Messaging endpoints live in control/messaging.ts.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { lidJid, phoneJid, type User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { registerCallRoutes } from './calls.ts';
import { registerChannelRoutes } from './channels.ts';
import { registerContentRoutes } from './content.ts';
import { installErrorEnvelope } from './errors.ts';
import { registerFaultRoutes } from './faults.ts';
import { registerGroupAdminRoutes } from './group-admin.ts';
import { registerGroupRoutes } from './groups.ts';
import { registerHistoryRoutes } from './history.ts';
import { registerInteractiveReplyRoutes } from './interactive-replies.ts';
import { registerLabelRoutes } from './labels.ts';
import { registerMediaExpiryRoutes } from './media-expiry.ts';
import { registerMessagingRoutes } from './messaging.ts';
import { registerProfileRoutes } from './profile.ts';
import { Phone } from './schemas.ts';
import { registerStatusRoutes } from './status.ts';
import { registerUpdateRoutes } from './updates.ts';

const CreateUser = Type.Object(
  {
    phone: Phone,
    pushName: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    registered: Type.Optional(Type.Boolean()),
    verifiedName: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    avatarUrl: Type.Optional(Type.String({ pattern: '^https://[^\\s]+$', maxLength: 2048 })),
    about: Type.Optional(Type.String({ minLength: 1, maxLength: 139 })),
    hidesPhone: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const Scan = Type.Object(
  { code: Type.String({ minLength: 1 }), phone: Phone },
  { additionalProperties: false },
);

const EnterCode = Type.Object(
  { code: Type.String({ minLength: 8, maxLength: 16, pattern: '^[0-9A-Za-z -]+$' }), phone: Phone },
  { additionalProperties: false },
);

const PhoneParams = Type.Object({ phone: Phone });

/** The JSON view of a user. */
export function userView(user: User) {
  return {
    phone: user.phone,
    lid: user.lid,
    jid: phoneJid(user.phone),
    lidJid: lidJid(user.lid),
    pushName: user.pushName,
    registered: user.registered,
    ...(user.verifiedName ? { verifiedName: user.verifiedName } : {}),
    ...(user.avatar ? { avatar: user.avatar } : {}),
    ...(user.about !== undefined ? { about: user.about } : {}),
    ...(user.hidesPhone ? { hidesPhone: true } : {}),
  };
}

/** The JSON view of an account: its devices with their open socket counts. */
export function accountView(user: User) {
  return {
    phone: user.phone,
    lid: user.lid,
    devices: [...user.devices.values()].map((d) => ({ id: d.id, linked: d.linked, sockets: d.sockets.size })),
  };
}

/** Registers every /control route on `app`. */
export function registerControlRoutes(app: FastifyInstance, ctx: SimContext): void {
  installErrorEnvelope(app);

  app.post<{ Body: Static<typeof CreateUser> }>(
    '/control/users',
    { schema: { body: CreateUser } },
    async (request, reply) => {
      const user = ctx.accounts.create(request.body);
      return reply.status(201).send(userView(user));
    },
  );

  app.post<{ Body: Static<typeof Scan> }>('/control/scan', { schema: { body: Scan } }, async (request) => {
    return ctx.pairing.scan(request.body.code, request.body.phone);
  });

  app.post<{ Body: Static<typeof EnterCode> }>(
    '/control/pairing-code',
    { schema: { body: EnterCode } },
    async (request) => ctx.pairing.linkCodes.enter(request.body.phone, request.body.code),
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/accounts/:phone',
    { schema: { params: PhoneParams } },
    async (request) => accountView(ctx.accounts.require(request.params.phone, 'phone')),
  );

  registerFaultRoutes(app, ctx);
  registerMessagingRoutes(app, ctx);
  registerGroupRoutes(app, ctx);
  registerCallRoutes(app, ctx);
  registerGroupAdminRoutes(app, ctx);
  registerHistoryRoutes(app, ctx);
  registerContentRoutes(app, ctx);
  registerInteractiveReplyRoutes(app, ctx);
  registerMediaExpiryRoutes(app, ctx);
  registerUpdateRoutes(app, ctx);
  registerProfileRoutes(app, ctx);
  registerChannelRoutes(app, ctx);
  registerStatusRoutes(app, ctx);
  registerLabelRoutes(app, ctx);
}
