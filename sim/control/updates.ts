/**
 * Control API: a simulated user edits or deletes for everyone a message it sent to a linked account, or votes on
 * a poll the account sent it — each sent as the platform relays it, a Signal-encrypted message to the account's
 * companion devices (messaging/send.ts; in a group, messaging/group-send.ts):
 * - edit: `protocolMessage` type MESSAGE_EDIT with the message's key (`fromMe` from the user's side) and the new
 *   `editedMessage` (Baileys Utils/messages.js builds the same for `{ edit }`);
 * - delete: `protocolMessage` type REVOKE with the message's key;
 * - vote: `pollUpdateMessage` with the poll's key and the vote encrypted with the poll's secret
 *   (messaging/polls.ts encryptVote), the chosen options as SHA-256 digests of their names.
 * With `groupJid` the message, or the poll, is in that group, and the edit, deletion or vote goes to the group.
 */
import { type Static, Type } from '@sinclair/typebox';
import { proto } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { encryptVote, receivedPoll } from '../messaging/polls.ts';
import { sendMessage } from '../messaging/send.ts';
import { phoneJid, type User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { sendGroupText } from './groups.ts';
import { Phone } from './schemas.ts';

const MessageId = Type.String({ minLength: 1, maxLength: 128 });
const GroupJid = Type.Optional(Type.String({ pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$' }));

const Edit = Type.Object(
  {
    from: Phone,
    to: Phone,
    id: MessageId,
    text: Type.String({ minLength: 1, maxLength: 65536 }),
    groupJid: GroupJid,
  },
  { additionalProperties: false },
);

const Delete = Type.Object(
  { from: Phone, to: Phone, id: MessageId, groupJid: GroupJid },
  { additionalProperties: false },
);

const Vote = Type.Object(
  {
    from: Phone,
    to: Phone,
    pollId: MessageId,
    options: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 12 }),
    groupJid: GroupJid,
  },
  { additionalProperties: false },
);

/** The sender and the account of a request. @throws ControlError 400 when they are the same, 409 unregistered. */
function parties(ctx: SimContext, from: string, to: string): { sender: User; account: User } {
  const sender = ctx.accounts.require(from, 'from');
  const account = ctx.accounts.require(to, 'to');
  if (sender === account) throw new ControlError(400, 'to: must differ from from');
  if (!account.registered) throw new ControlError(409, `to: ${to} is not registered`);
  return { sender, account };
}

/**
 * Checks that `sender` sent message `id` to the chat: `account`'s 1:1 chat, or group `groupJid`.
 * @throws ControlError 404 otherwise.
 */
function ownSent(sender: User, account: User, id: string, groupJid: string | undefined): void {
  const sent = sender.sent.get(id);
  const chat = groupJid ?? phoneJid(account.phone);
  if (!sent || sent.to !== chat) {
    throw new ControlError(
      404,
      `id: ${id} is not a message ${sender.phone} sent to ${groupJid ?? account.phone}`,
    );
  }
}

/** Registers the edit, delete and vote routes. */
export function registerUpdateRoutes(app: FastifyInstance, ctx: SimContext): void {
  const deliverTo = async (sender: User, account: User, message: proto.IMessage, groupJid?: string) => {
    if (groupJid) return sendGroupText(ctx, sender, groupJid, message, account);
    const result = await sendMessage(ctx.signalQueue, sender, account, message);
    if (result.devices === 0)
      throw new ControlError(409, `to: account ${account.phone} has no linked device`);
    return result;
  };
  const Types = proto.Message.ProtocolMessage.Type;
  const keyOf = (account: User, id: string, groupJid: string | undefined): proto.IMessageKey => ({
    remoteJid: groupJid ?? phoneJid(account.phone),
    fromMe: true,
    id,
  });

  app.post<{ Body: Static<typeof Edit> }>(
    '/control/messages/edit',
    { schema: { body: Edit } },
    async (request, reply) => {
      const { from, to, id, text, groupJid } = request.body;
      const { sender, account } = parties(ctx, from, to);
      ownSent(sender, account, id, groupJid);
      const message: proto.IMessage = {
        protocolMessage: {
          key: keyOf(account, id, groupJid),
          type: Types.MESSAGE_EDIT,
          editedMessage: { conversation: text },
          timestampMs: Date.now(),
        },
      };
      return reply.status(201).send(await deliverTo(sender, account, message, groupJid));
    },
  );

  app.post<{ Body: Static<typeof Delete> }>(
    '/control/messages/delete',
    { schema: { body: Delete } },
    async (request, reply) => {
      const { from, to, id, groupJid } = request.body;
      const { sender, account } = parties(ctx, from, to);
      ownSent(sender, account, id, groupJid);
      const message: proto.IMessage = {
        protocolMessage: { key: keyOf(account, id, groupJid), type: Types.REVOKE },
      };
      return reply.status(201).send(await deliverTo(sender, account, message, groupJid));
    },
  );

  app.post<{ Body: Static<typeof Vote> }>(
    '/control/polls/vote',
    { schema: { body: Vote } },
    async (request, reply) => {
      const { from, to, pollId, options, groupJid } = request.body;
      const { sender, account } = parties(ctx, from, to);
      const poll = receivedPoll(sender, pollId);
      if (!poll || poll.creator !== account.phone || poll.group !== groupJid) {
        const where = groupJid ? ` in ${groupJid}` : '';
        throw new ControlError(404, `pollId: ${from} received no poll ${pollId} from ${to}${where}`);
      }
      for (const option of options) {
        if (!poll.options.includes(option)) {
          throw new ControlError(400, `options: ${JSON.stringify(option)} is not an option of the poll`);
        }
      }
      if (poll.selectableCount > 0 && options.length > poll.selectableCount) {
        throw new ControlError(400, `options: the poll allows at most ${poll.selectableCount}`);
      }
      const vote = encryptVote(
        poll,
        { pollId, creatorJid: phoneJid(account.phone), voterJid: phoneJid(sender.phone) },
        options,
      );
      const pollKey: proto.IMessageKey = groupJid
        ? { remoteJid: groupJid, fromMe: false, id: pollId, participant: phoneJid(account.phone) }
        : { remoteJid: phoneJid(account.phone), fromMe: false, id: pollId };
      const message: proto.IMessage = {
        pollUpdateMessage: { pollCreationMessageKey: pollKey, vote, senderTimestampMs: Date.now() },
      };
      return reply.status(201).send(await deliverTo(sender, account, message, groupJid));
    },
  );
}
