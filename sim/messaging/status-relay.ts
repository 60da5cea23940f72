/**
 * Status updates (stories) a linked Baileys device posts, as the platform's server fans them out. Baileys 7
 * (lib/Socket/messages-send.js relayMessage, `isStatus`) sends one `<message to="status@broadcast">` shaped like a
 * group message: the `statusJidList` users' devices each get a pkmsg/msg carrying
 * `senderKeyDistributionMessage { groupId: "status@broadcast", … }` in `<participants>` (a status keeps no sender-key
 * memory, so every device gets it every time), and one `<enc type="skmsg">` holds the status for all. The server
 * then, for every user named in `<participants>` but the sender:
 * - the user's phone (device 0) takes its sender key from the pkmsg/msg, decrypts the skmsg, and the status lands
 *   in its inbox marked `status: true` (the phone's status list, `GET /control/users/{phone}/statuses`);
 * - each other linked companion named gets one stanza `from="status@broadcast"`, `participant` = the sending device
 *   by LID, `participant_pn` beside it, its pkmsg/msg and the skmsg — the shape Baileys' decodeMessageNode reads as
 *   `other_status`.
 * A phone that views a status sends the poster a read receipt (control/status.ts).
 */
import { completeMedia } from '../media/receive.ts';
import { lidJid, phoneJid, type User } from '../model/accounts.ts';
import { entryFromMessage } from '../model/inbox.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import {
  asCiphertext,
  incomingMessageNode,
  type OutgoingEnc,
  type OutgoingMessage,
} from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';

/** The chat of status updates. */
export const STATUS_JID = 'status@broadcast';

/**
 * Relays a device's `<message to="status@broadcast">` (see the module comment). A status without an skmsg is logged
 * and dropped; an undecryptable copy is logged and published as `decrypt-error`, as for other messages.
 */
export async function relayStatusMessage(
  ctx: SimContext,
  queue: KeyedQueue,
  stanza: DeviceStanza,
  outgoing: OutgoingMessage,
): Promise<void> {
  const { user: sender, device } = stanza;
  const senderJid = phoneJid(sender.phone, device.id);
  const skmsg = outgoing.encs.find((e) => e.type === 'skmsg');
  if (!skmsg) {
    ctx.log.warn({ id: outgoing.id }, 'status without an skmsg dropped');
    return;
  }
  const recipients = new Map<string, User>();
  for (const enc of outgoing.encs) {
    if (enc.type === 'skmsg') continue;
    const target = ctx.accounts.resolve(enc.jid);
    if (!target) {
      ctx.log.warn({ jid: enc.jid, id: outgoing.id }, 'status for an unknown device dropped');
      continue;
    }
    if (target.user === sender) continue;
    recipients.set(target.user.phone, target.user);
    if (target.device === 0) {
      await takeSenderKey(ctx, queue, target.user, senderJid, outgoing, enc);
      continue;
    }
    const companion = target.user.devices.get(target.device);
    if (!companion?.linked) continue;
    deliver(
      companion,
      incomingMessageNode({
        id: outgoing.id,
        from: STATUS_JID,
        participant: lidJid(sender.lid, device.id),
        senderAlt: phoneJid(sender.phone),
        type: outgoing.type,
        pushName: sender.pushName,
        enc: [
          { type: enc.type, ciphertext: enc.ciphertext, attrs: enc.attrs },
          { type: 'skmsg', ciphertext: skmsg.ciphertext, attrs: skmsg.attrs },
        ],
        ...(enc.type === 'pkmsg' && outgoing.deviceIdentity
          ? { deviceIdentity: outgoing.deviceIdentity }
          : {}),
      }),
    );
  }
  for (const recipient of recipients.values()) {
    await showOnPhone(ctx, queue, recipient, stanza, outgoing, skmsg);
  }
}

/** The recipient's phone decrypts its pkmsg/msg, which stores the poster's sender key for status@broadcast. */
async function takeSenderKey(
  ctx: SimContext,
  queue: KeyedQueue,
  phone: User,
  senderJid: string,
  outgoing: OutgoingMessage,
  enc: OutgoingEnc,
): Promise<void> {
  try {
    await queue.run(phone.phone, () => phone.handset.decryptMessage(senderJid, asCiphertext(enc)));
  } catch (error) {
    ctx.log.warn(
      { err: error, id: outgoing.id, to: enc.jid, from: senderJid },
      'could not decrypt a status key',
    );
    ctx.events.emit('decrypt-error', { user: phone, id: outgoing.id, from: senderJid, error });
  }
}

/** The recipient's phone decrypts the status with the poster's sender key; it lands in its inbox. */
async function showOnPhone(
  ctx: SimContext,
  queue: KeyedQueue,
  recipient: User,
  { user: sender, device }: DeviceStanza,
  outgoing: OutgoingMessage,
  skmsg: OutgoingEnc,
): Promise<void> {
  const senderJid = phoneJid(sender.phone, device.id);
  try {
    const decoded = await queue.run(recipient.phone, async () =>
      recipient.handset.decryptGroupMessage(STATUS_JID, senderJid, skmsg.ciphertext),
    );
    const entry = {
      ...entryFromMessage(
        { id: outgoing.id, from: sender.phone, fromDevice: device.id, timestamp: new Date().toISOString() },
        decoded.message,
      ),
      status: true as const,
    };
    if (recipient.inbox.some((e) => e.status && e.id === entry.id && e.from === entry.from)) return;
    await completeMedia(entry, decoded.message, ctx);
    recipient.inbox.push(entry);
    ctx.events.emit('inbox', { user: recipient, entry });
  } catch (error) {
    ctx.log.warn(
      { err: error, id: outgoing.id, to: recipient.phone, from: senderJid },
      'could not decrypt a status',
    );
    ctx.events.emit('decrypt-error', { user: recipient, id: outgoing.id, from: senderJid, error });
  }
}
