/**
 * Control API, faults: `POST /control/faults` breaks an account's connections or restricts the account, and
 * `GET /control/connections` (`DELETE` to clear) lists the connection attempts the simulator saw since it
 * started (server/attempts.ts). Socket faults (`drop`, `stream-error`, `silence`, `lose-acks`: the client's acks and
 * receipts of the messages sent on the socket never arrive, so a later drop puts them back to the offline queue;
 * `withhold-acks`: the messages the client sends are taken and delivered but never acked; `slow-acks`: acked `ms`
 * milliseconds late) act
 * on the open connections of the account's companions and answer 409 when none is open; account faults (`nack`,
 * `reachout-lock`, `block`, `unblock`) are kept with the account (model/restrictions.ts) and in the state file.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { User } from '../model/accounts.ts';
import { type SimContext, unlinkDevice } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const Fault = Type.Object(
  {
    phone: Phone,
    kind: Type.Union([
      Type.Literal('drop'),
      Type.Literal('stream-error'),
      Type.Literal('silence'),
      Type.Literal('lose-acks'),
      Type.Literal('withhold-acks'),
      Type.Literal('slow-acks'),
      Type.Literal('nack'),
      Type.Literal('reachout-lock'),
      Type.Literal('block'),
      Type.Literal('unblock'),
    ]),
    code: Type.Optional(Type.Integer({ minimum: 100, maximum: 999 })),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 31_536_000 })),
    ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
  },
  { additionalProperties: false },
);
type FaultBody = Static<typeof Fault>;

/** Which optional fields each kind takes, and which of them it requires. */
const FIELDS: Record<FaultBody['kind'], { allowed: string[]; required: string[] }> = {
  drop: { allowed: [], required: [] },
  'stream-error': { allowed: ['code'], required: ['code'] },
  silence: { allowed: [], required: [] },
  'lose-acks': { allowed: [], required: [] },
  'withhold-acks': { allowed: [], required: [] },
  'slow-acks': { allowed: ['ms'], required: ['ms'] },
  nack: { allowed: ['code', 'count'], required: ['code'] },
  'reachout-lock': { allowed: ['seconds'], required: ['seconds'] },
  block: { allowed: ['code'], required: ['code'] },
  unblock: { allowed: [], required: [] },
};

function checkFields(body: FaultBody): void {
  const { allowed, required } = FIELDS[body.kind];
  for (const field of ['code', 'count', 'seconds', 'ms'] as const) {
    const present = body[field] !== undefined;
    if (!present && required.includes(field))
      throw new ControlError(400, `${field}: is required for kind "${body.kind}"`);
    if (present && !allowed.includes(field))
      throw new ControlError(400, `${field}: not allowed with kind "${body.kind}"`);
  }
}

function companionSockets(user: User): number {
  return [...user.devices.values()].filter((d) => d.id !== 0).reduce((n, d) => n + d.sockets.size, 0);
}

/** Applies a socket fault to every open companion connection of `user`. */
function socketFault(ctx: SimContext, user: User, body: FaultBody): void {
  for (const device of [...user.devices.values()].filter((d) => d.id !== 0)) {
    if (body.kind === 'stream-error' && body.code === 401) {
      // The phone removed the device: the platform ends its streams with 401 and refuses later logins.
      if (device.linked) unlinkDevice(ctx, user, device);
      continue;
    }
    for (const socket of [...device.sockets]) {
      if (body.kind === 'drop') socket.drop();
      else if (body.kind === 'silence') socket.silenced = true;
      else if (body.kind === 'lose-acks') socket.acksLost = true;
      else if (body.kind === 'withhold-acks') socket.acksWithheld = true;
      else if (body.kind === 'slow-acks') socket.ackDelayMs = body.ms ?? 0;
      else socket.streamError(body.code ?? 515);
    }
  }
}

/** Applies an account fault; `block` also ends the open connections with a stream error of its code. */
function accountFault(user: User, body: FaultBody): void {
  const restrictions = user.restrictions ?? {};
  user.restrictions = restrictions;
  switch (body.kind) {
    case 'nack':
      restrictions.nack = { code: body.code ?? 0, count: body.count ?? 1 };
      return;
    case 'reachout-lock':
      if (body.seconds) restrictions.reachoutUntil = Date.now() + body.seconds * 1000;
      else delete restrictions.reachoutUntil;
      return;
    case 'block':
      restrictions.loginFailure = body.code ?? 0;
      for (const device of user.devices.values()) {
        for (const socket of [...device.sockets]) socket.streamError(restrictions.loginFailure);
      }
      return;
    case 'unblock':
      delete restrictions.loginFailure;
      return;
    default:
      return;
  }
}

/** Registers POST /control/faults and GET/DELETE /control/connections. */
export function registerFaultRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: FaultBody }>('/control/faults', { schema: { body: Fault } }, async (request) => {
    const body = request.body;
    const user = ctx.accounts.require(body.phone, 'phone');
    checkFields(body);
    const sockets = companionSockets(user);
    const onSockets =
      body.kind === 'drop' ||
      body.kind === 'stream-error' ||
      body.kind === 'silence' ||
      body.kind === 'lose-acks' ||
      body.kind === 'withhold-acks' ||
      body.kind === 'slow-acks';
    if (onSockets) {
      if (sockets === 0) throw new ControlError(409, `phone: account ${body.phone} has no open socket`);
      socketFault(ctx, user, body);
    } else {
      accountFault(user, body);
    }
    const { phone, kind, code, count, seconds, ms } = body;
    return {
      phone,
      kind,
      ...(code !== undefined ? { code } : {}),
      ...(count !== undefined ? { count } : {}),
      ...(seconds !== undefined ? { seconds } : {}),
      ...(ms !== undefined ? { ms } : {}),
      sockets,
    };
  });

  app.get('/control/connections', async () => ({
    attempts: ctx.connections.list().map((a) => ({ ...a, at: new Date(a.at).toISOString() })),
  }));

  app.delete('/control/connections', async (_request, reply) => {
    ctx.connections.clear();
    return reply.status(204).send();
  });
}
