/**
 * A simulated user sends a message to a linked account, as a phone does: it encrypts the Message to every
 * linked companion device of the account and — wrapped as a deviceSentMessage — to its own linked companions
 * (signal/fanout.ts encryptToDevices: a pre-key bundle is fetched, and a pkmsg sent, for devices it has no
 * session with yet). The server delivers one `<message>` per device, addressed from the sender's LID with its
 * phone JID as `sender_pn` ({@link senderAddressing}, signal/stanza.ts incomingMessageNode), now or at the
 * device's next login. Sent messages are kept so a
 * device that could not decrypt can get them again in a fresh session (`<receipt type="retry">`, relay.ts).
 */
import { randomBytes } from 'node:crypto';
import type { proto } from 'baileys';
import { type Device, lidJid, phoneJid, type User } from '../model/accounts.ts';
import { verifiedNameNode } from '../server/business.ts';
import { encryptToDevices, type FanoutTarget, incomingMessageNode } from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';

/** A message id as phones make them: 32 upper-case hex characters. */
export function newMessageId(): string {
  return randomBytes(16).toString('hex').toUpperCase();
}

/** Result of a send: the id, how many of the account's devices it was encrypted to, how many got it now. */
export interface SendResult {
  id: string;
  devices: number;
  online: number;
  /** True when the recipient blocked the sender: the message reached none of its devices. */
  blocked?: boolean;
}

function companions(user: User): Device[] {
  return [...user.devices.values()].filter((d) => d.id !== 0 && d.linked && d.keys);
}

/**
 * How the server names the sender of a 1:1 message: by LID (`from` = `<lid>@lid`, `sender_pn` = the phone JID),
 * as the platform addresses 1:1 messages between users who have LIDs (every simulated user has one). Baileys 7
 * then keys the session the message sets up by LID and reports the chat as the LID (phone JID in
 * `remoteJidAlt`), so its reply goes to the LID: a usync by LID carries no `<lid val>`, so Baileys does not
 * force a new session (messages-send.js getUSyncDevices refreshes sessions of every LID a usync returns) and
 * the reply is a `msg` on the session the pkmsg set up. A copy to the sender's own companions (`own`) keeps
 * the account's phone JID as `from` with the chat as `recipient`. A user who hides its phone (`hidesPhone`)
 * gets no `sender_pn`: the receiver knows it by LID only.
 */
export function senderAddressing(from: User, own: boolean): { from: string; senderAlt?: string } {
  if (own) return { from: phoneJid(from.phone), senderAlt: lidJid(from.lid) };
  // A user whose number the platform keeps private is named by LID alone.
  return from.hidesPhone
    ? { from: lidJid(from.lid) }
    : { from: lidJid(from.lid), senderAlt: phoneJid(from.phone) };
}

/**
 * Encrypts `message` from `from`'s phone to the companions of `to` (and copies to `from`'s) and delivers it. When
 * `to` blocked `from`, the platform accepts the message and delivers it to none of `to`'s devices.
 */
export async function sendMessage(
  queue: KeyedQueue,
  from: User,
  to: User,
  message: proto.IMessage,
): Promise<SendResult> {
  const id = newMessageId();
  const chat = phoneJid(to.phone);
  const linked = companions(to);
  const blocked = to.blocked?.includes(from.phone) ?? false;
  const recipients = blocked ? [] : linked;
  const own = companions(from);
  const byJid = new Map<string, { device: Device; own: boolean }>();
  const targets: FanoutTarget[] = [];
  for (const device of recipients) {
    const jid = phoneJid(to.phone, device.id);
    byJid.set(jid, { device, own: false });
    targets.push({ jid, ...(device.keys ? { keys: device.keys } : {}) });
  }
  for (const device of own) {
    const jid = phoneJid(from.phone, device.id);
    byJid.set(jid, { device, own: true });
    targets.push({ jid, own: true, ...(device.keys ? { keys: device.keys } : {}) });
  }
  let online = 0;
  await queue.run(from.phone, async () => {
    const ciphertexts = await encryptToDevices(from.handset, targets, message, chat);
    from.sent.set(id, { message, to: chat });
    for (const { jid, enc } of ciphertexts) {
      const target = byJid.get(jid);
      if (!target) continue;
      const node = incomingMessageNode({
        id,
        ...senderAddressing(from, target.own),
        pushName: from.pushName,
        enc: [enc],
        ...(target.own ? { recipient: chat } : {}),
      });
      // A business sender's messages carry its verified name (Baileys reads it as `verifiedBizName`).
      const verified = target.own ? undefined : verifiedNameNode(from);
      if (verified && Array.isArray(node.content)) node.content.push(verified);
      if (deliver(target.device, node) > 0 && !target.own) online++;
    }
  });
  return { id, devices: linked.length, online, ...(blocked ? { blocked: true } : {}) };
}
