/**
 * Control API, calls: a simulated user calls a linked account. The platform's call signalling as Baileys reads
 * it (Socket/messages-recv.js handleCall, Utils/generics.js getCallStatusFromNode): a `<call from=<caller> id t>`
 * stanza holding one child — `<offer call-id call-creator caller_pn>` (with `<audio>`, or `<video>` for a video
 * call) when it rings, `<terminate call-id call-creator>` when the caller hangs up — sent to every open socket of
 * the account's companion devices. When a device declines, Baileys sends `<call to=<caller>><reject call-id
 * call-creator count/></call>` (rejectCall) and waits for the server's `<ack class="call">` (server/session.ts
 * answers it); the simulator then marks the call rejected and puts a `call-reject` entry in the caller's inbox. A
 * `<call>` stanza the client did not ack is handed over again at its next login, as a message is.
 */
import { randomBytes } from 'node:crypto';
import { type Static, Type } from '@sinclair/typebox';
import type { BinaryNode } from 'baileys';
import { getBinaryNodeChild } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { phoneJid, type User } from '../model/accounts.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { sendToAccount } from './messaging.ts';
import { Phone } from './schemas.ts';

/** One call a simulated user made. */
export interface SimCall {
  id: string;
  /** The caller's phone (digits) and the called account's. */
  from: string;
  to: string;
  video: boolean;
  /** `ringing` after the offer, `rejected` once a device of the account declined, `terminated` after hang-up. */
  status: 'ringing' | 'rejected' | 'terminated';
  /** ISO 8601 time of the offer, and of the reject when there was one. */
  offeredAt: string;
  rejectedAt?: string;
  /** The device of the account that declined. */
  rejectedByDevice?: number;
}

const Call = Type.Object(
  { to: Phone, video: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
const PhoneParams = Type.Object({ phone: Phone });
const CallParams = Type.Object({ phone: Phone, id: Type.String({ pattern: '^[0-9A-F]{32}$' }) });

/**
 * A `<call>` stanza stays with the socket until the client acks it (Baileys' handleCall acks every one): one unacked
 * when the socket closes (`POST /control/faults` kind `lose-acks`) is handed over again, marked `offline`, at the
 * device's next login, as the platform hands over what it kept in the device's offline queue.
 */
const KEPT = { keptUntilAcked: true } as const;

/** The calls of every simulator, by call id (in memory only: calls do not outlive the simulator). */
const CALLS = new WeakMap<SimContext, Map<string, SimCall>>();

function callsOf(ctx: SimContext): Map<string, SimCall> {
  let calls = CALLS.get(ctx);
  if (!calls) {
    calls = new Map();
    CALLS.set(ctx, calls);
  }
  return calls;
}

function seconds(): string {
  return String(Math.floor(Date.now() / 1000));
}

/** A `<call>` stanza from `caller` holding `child`. */
function callStanza(caller: User, id: string, child: BinaryNode): BinaryNode {
  return { tag: 'call', attrs: { from: phoneJid(caller.phone), id, t: seconds() }, content: [child] };
}

/** Marks a call rejected when a device of the account sends Baileys' reject stanza. */
function onStanza(ctx: SimContext, { user, device, node }: DeviceStanza): void {
  if (node.tag !== 'call') return;
  const reject = getBinaryNodeChild(node, 'reject');
  const call = reject ? callsOf(ctx).get(reject.attrs['call-id'] ?? '') : undefined;
  if (!call || call.to !== user.phone || call.status !== 'ringing') return;
  call.status = 'rejected';
  call.rejectedAt = new Date().toISOString();
  call.rejectedByDevice = device.id;
  const caller = ctx.accounts.get(call.from);
  if (!caller) return;
  const entry = {
    id: call.id,
    from: user.phone,
    fromDevice: device.id,
    type: 'call-reject',
    timestamp: call.rejectedAt,
  };
  caller.inbox.push(entry);
  ctx.events.emit('inbox', { user: caller, entry });
}

/** Registers the call routes and the listener for the accounts' reject stanzas. */
export function registerCallRoutes(app: FastifyInstance, ctx: SimContext): void {
  ctx.events.on('stanza', (stanza: DeviceStanza) => onStanza(ctx, stanza));

  app.post<{ Params: Static<typeof PhoneParams>; Body: Static<typeof Call> }>(
    '/control/users/:phone/call',
    { schema: { params: PhoneParams, body: Call } },
    async (request, reply) => {
      const caller = ctx.accounts.require(request.params.phone, 'phone');
      const account = ctx.accounts.require(request.body.to, 'to');
      if (caller === account) throw new ControlError(400, 'to: must differ from the caller');
      const video = request.body.video === true;
      const id = randomBytes(16).toString('hex').toUpperCase();
      const creator = phoneJid(caller.phone);
      const offer: BinaryNode = {
        tag: 'offer',
        attrs: { 'call-id': id, 'call-creator': creator, caller_pn: creator },
        content: [
          video
            ? { tag: 'video', attrs: { enc: 'vp8' } }
            : { tag: 'audio', attrs: { enc: 'opus', rate: '16000' } },
        ],
      };
      const sockets = sendToAccount(account, (stanzaId) => callStanza(caller, stanzaId(), offer), KEPT);
      if (sockets === 0) throw new ControlError(409, `to: account ${account.phone} has no open socket`);
      const call: SimCall = {
        id,
        from: caller.phone,
        to: account.phone,
        video,
        status: 'ringing',
        offeredAt: new Date().toISOString(),
      };
      callsOf(ctx).set(id, call);
      return reply.status(201).send({ ...call, sockets });
    },
  );

  app.post<{ Params: Static<typeof CallParams> }>(
    '/control/users/:phone/calls/:id/terminate',
    { schema: { params: CallParams } },
    async (request) => {
      const call = callsOf(ctx).get(request.params.id);
      if (!call || call.from !== request.params.phone)
        throw new ControlError(404, 'id: no such call of this user');
      const caller = ctx.accounts.require(call.from, 'phone');
      const account = ctx.accounts.require(call.to, 'to');
      const creator = phoneJid(caller.phone);
      const sockets = sendToAccount(
        account,
        (stanzaId) =>
          callStanza(caller, stanzaId(), {
            tag: 'terminate',
            attrs: { 'call-id': call.id, 'call-creator': creator },
          }),
        KEPT,
      );
      if (call.status === 'ringing') call.status = 'terminated';
      return { ...call, sockets };
    },
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/calls',
    { schema: { params: PhoneParams } },
    async (request) => {
      const caller = ctx.accounts.require(request.params.phone, 'phone');
      return [...callsOf(ctx).values()].filter((call) => call.from === caller.phone);
    },
  );
}
