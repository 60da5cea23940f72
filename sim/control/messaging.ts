/**
 * Control API, part 2: what simulated users do towards a linked account — receipts and chat state — sent to
 * every open socket of the account's companion devices as the platform relays them (`<receipt>` and
 * `<chatstate>` stanzas as Baileys' messages-recv.js handleReceipt and chats.js handlePresenceUpdate read them).
 * With `groupJid`, a text goes to the group (control/groups.ts sendGroupText) and a receipt comes from the
 * group with the member as `participant`.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { BinaryNode, proto } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { sendMessage } from '../messaging/send.ts';
import { lidJid, phoneJid, type User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { sendGroupText } from './groups.ts';
import { Phone } from './schemas.ts';

const Receipts = Type.Object(
  {
    from: Phone,
    to: Phone,
    ids: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { minItems: 1, maxItems: 100 }),
    type: Type.Union([Type.Literal('delivery'), Type.Literal('read'), Type.Literal('played')]),
    groupJid: Type.Optional(Type.String({ pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$' })),
  },
  { additionalProperties: false },
);

const Message = Type.Object(
  {
    from: Phone,
    to: Phone,
    text: Type.String({ minLength: 1, maxLength: 65536 }),
    quotedId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    groupJid: Type.Optional(Type.String({ pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$' })),
  },
  { additionalProperties: false },
);

const PhoneParams = Type.Object({ phone: Phone });

const Presence = Type.Object(
  {
    from: Phone,
    to: Phone,
    state: Type.Union([Type.Literal('composing'), Type.Literal('recording'), Type.Literal('paused')]),
  },
  { additionalProperties: false },
);

/**
 * Sends `node` (with a fresh id per socket when `id` is not set) to every open companion socket of `to`; returns how
 * many sockets took it. With `keptUntilAcked` each socket keeps it until the client acks it (`DeviceSocket.sendMessage`:
 * what is unacked when the socket closes is handed over again at the device's next login, as the platform does with a
 * `<call>` stanza whose ack was lost); otherwise it is sent once.
 */
export function sendToAccount(
  to: User,
  build: (socketStanzaId: () => string) => BinaryNode,
  options: { keptUntilAcked?: boolean } = {},
): number {
  let sent = 0;
  for (const device of to.devices.values()) {
    if (device.id === 0 || !device.linked) continue;
    for (const socket of device.sockets) {
      const node = build(() => socket.stanzaId());
      if (options.keptUntilAcked === true) socket.sendMessage(node);
      else socket.send(node);
      sent++;
    }
  }
  return sent;
}

/** How receipts and chat state name a user: its phone JID, or its LID when it hides its phone. */
function userAddress(user: User): string {
  return user.hidesPhone ? lidJid(user.lid) : phoneJid(user.phone);
}

function now(): string {
  return String(Math.floor(Date.now() / 1000));
}

/** Registers the messaging routes. */
export function registerMessagingRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: Static<typeof Message> }>(
    '/control/messages',
    { schema: { body: Message } },
    async (request, reply) => {
      const { from, to, text, quotedId, groupJid } = request.body;
      const sender = ctx.accounts.require(from, 'from');
      const account = ctx.accounts.require(to, 'to');
      if (sender === account) throw new ControlError(400, 'to: must differ from from');
      if (!account.registered) throw new ControlError(409, `to: ${to} is not registered`);
      const message: proto.IMessage = quotedId
        ? {
            extendedTextMessage: {
              text,
              contextInfo: { stanzaId: quotedId, participant: phoneJid(account.phone) },
            },
          }
        : { conversation: text };
      if (groupJid !== undefined) {
        return reply.status(201).send(await sendGroupText(ctx, sender, groupJid, message, account));
      }
      const result = await sendMessage(ctx.signalQueue, sender, account, message);
      if (result.devices === 0) throw new ControlError(409, `to: account ${to} has no linked device`);
      return reply.status(201).send(result);
    },
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/inbox',
    { schema: { params: PhoneParams } },
    async (request) => ctx.accounts.require(request.params.phone, 'phone').inbox,
  );

  app.post<{ Body: Static<typeof Receipts> }>(
    '/control/receipts',
    { schema: { body: Receipts } },
    async (request) => {
      const { from, to, ids, type, groupJid } = request.body;
      const sender = ctx.accounts.require(from, 'from');
      const account = ctx.accounts.require(to, 'to');
      const [first, ...rest] = ids;
      const sockets = sendToAccount(account, () => {
        // In a group the receipt comes from the group, the member who acknowledged as `participant` (its LID).
        const attrs: Record<string, string> = groupJid
          ? { from: groupJid, participant: lidJid(sender.lid), id: first ?? '', t: now() }
          : { from: userAddress(sender), id: first ?? '', t: now() };
        if (type !== 'delivery') attrs.type = type;
        const node: BinaryNode = { tag: 'receipt', attrs };
        if (rest.length > 0) {
          node.content = [
            { tag: 'list', attrs: {}, content: rest.map((id) => ({ tag: 'item', attrs: { id } })) },
          ];
        }
        return node;
      });
      if (sockets === 0) throw new ControlError(409, `to: account ${to} has no open socket`);
      return { sockets };
    },
  );

  app.post<{ Body: Static<typeof Presence> }>(
    '/control/presence',
    { schema: { body: Presence } },
    async (request) => {
      const { from, to, state } = request.body;
      const sender = ctx.accounts.require(from, 'from');
      const account = ctx.accounts.require(to, 'to');
      const child: BinaryNode =
        state === 'paused'
          ? { tag: 'paused', attrs: {} }
          : state === 'recording'
            ? { tag: 'composing', attrs: { media: 'audio' } }
            : { tag: 'composing', attrs: {} };
      const sockets = sendToAccount(account, () => ({
        tag: 'chatstate',
        attrs: { from: userAddress(sender) },
        content: [child],
      }));
      if (sockets === 0) throw new ControlError(409, `to: account ${to} has no open socket`);
      return { sockets };
    },
  );
}
