/**
 * Group messages a linked Baileys device sends, as the platform's server fans them out. Baileys 7
 * (lib/Socket/messages-send.js relayMessage, group branch) sends one `<message to="<group>@g.us"
 * addressing_mode="lid">` holding `<participants>` — a pkmsg/msg per member device that lacks its sender key,
 * carrying `senderKeyDistributionMessage { groupId, axolotlSenderKeyDistributionMessage }` — and one
 * `<enc type="skmsg">` for everybody. The server then:
 * - hands each simulated member's phone (device 0) its pkmsg/msg (the phone stores the sender key), then the
 *   skmsg, which the phone decrypts with that key; the text lands in its inbox with `group` set;
 * - forwards to every other linked companion of every member (the sender's own included) one group stanza:
 *   `from` = the group, `participant` = the sending device by LID, `participant_pn` beside it, its own
 *   pkmsg/msg (if it got one) followed by the skmsg — the shape Baileys' decodeMessageNode reads.
 * Undecryptable copies are logged and published as `decrypt-error`, as for 1:1 messages.
 */
import { lidJid, phoneJid, type User } from '../model/accounts.ts';
import { type Group, groupsOf } from '../model/groups.ts';
import { entryFromMessage } from '../model/inbox.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import {
  asCiphertext,
  type EncInput,
  incomingMessageNode,
  type OutgoingEnc,
  type OutgoingMessage,
} from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';
import { rememberPoll } from './polls.ts';

/** True when `jid` names a group (`…@g.us`). */
export function isGroupJid(jid: string): boolean {
  return jid.endsWith('@g.us');
}

/** Decrypts the sender-key distributions addressed to simulated phones (device 0). */
async function distributeToPhones(
  ctx: SimContext,
  queue: KeyedQueue,
  group: Group,
  senderJid: string,
  outgoing: OutgoingMessage,
): Promise<void> {
  for (const enc of outgoing.encs) {
    if (enc.type === 'skmsg') continue;
    const target = ctx.accounts.resolve(enc.jid);
    if (target?.device !== 0 || !group.members.has(target.user.phone)) continue;
    const phone = target.user;
    try {
      await queue.run(phone.phone, () => phone.handset.decryptMessage(senderJid, asCiphertext(enc)));
    } catch (error) {
      ctx.log.warn(
        { err: error, id: outgoing.id, to: enc.jid, from: senderJid },
        'could not decrypt a message',
      );
      ctx.events.emit('decrypt-error', { user: phone, id: outgoing.id, from: senderJid, error });
    }
  }
}

/** Each member phone but the sender's decrypts the skmsg; the message goes to its inbox. */
async function decryptOnPhones(
  ctx: SimContext,
  queue: KeyedQueue,
  group: Group,
  sender: DeviceStanza,
  outgoing: OutgoingMessage,
  skmsg: OutgoingEnc,
): Promise<void> {
  const senderJid = phoneJid(sender.user.phone, sender.device.id);
  const timestamp = new Date().toISOString();
  for (const { user } of group.members.values()) {
    if (user === sender.user) continue;
    try {
      const decoded = await queue.run(user.phone, async () =>
        user.handset.decryptGroupMessage(group.jid, senderJid, skmsg.ciphertext),
      );
      const entry = {
        ...entryFromMessage(
          { id: outgoing.id, from: sender.user.phone, fromDevice: sender.device.id, timestamp },
          decoded.message,
        ),
        group: group.jid,
      };
      rememberPoll(user, entry, decoded.message);
      user.inbox.push(entry);
      ctx.events.emit('inbox', { user, entry });
    } catch (error) {
      ctx.log.warn(
        { err: error, id: outgoing.id, group: group.jid, to: user.phone, from: senderJid },
        'could not decrypt a group message',
      );
      ctx.events.emit('decrypt-error', { user, id: outgoing.id, from: senderJid, error });
    }
  }
}

/** Forwards the group stanza to every linked companion of every member but the sending device. */
function forwardToCompanions(
  ctx: SimContext,
  group: Group,
  { user, device }: DeviceStanza,
  outgoing: OutgoingMessage,
  skmsg: OutgoingEnc,
): void {
  const byDevice = new Map<string, OutgoingEnc>();
  for (const enc of outgoing.encs) {
    const target = enc.type === 'skmsg' ? undefined : ctx.accounts.resolve(enc.jid);
    if (target) byDevice.set(`${target.user.phone}:${target.device}`, enc);
  }
  for (const { user: member } of group.members.values()) {
    for (const target of member.devices.values()) {
      if (target.id === 0 || !target.linked || target === device) continue;
      const own = byDevice.get(`${member.phone}:${target.id}`);
      const enc: EncInput[] = own ? [{ type: own.type, ciphertext: own.ciphertext, attrs: own.attrs }] : [];
      enc.push({ type: 'skmsg', ciphertext: skmsg.ciphertext, attrs: skmsg.attrs });
      deliver(
        target,
        incomingMessageNode({
          id: outgoing.id,
          from: group.jid,
          participant: lidJid(user.lid, device.id),
          senderAlt: phoneJid(user.phone),
          type: outgoing.type,
          pushName: user.pushName,
          enc,
          attrs: { addressing_mode: 'lid' },
          ...(own?.type === 'pkmsg' && outgoing.deviceIdentity
            ? { deviceIdentity: outgoing.deviceIdentity }
            : {}),
        }),
      );
    }
  }
}

/**
 * Relays a device's `<message>` to a group (see the module comment). A group the simulator does not know, or
 * one the sender is not in, is logged and dropped.
 */
export async function relayGroupMessage(
  ctx: SimContext,
  queue: KeyedQueue,
  stanza: DeviceStanza,
  outgoing: OutgoingMessage,
): Promise<void> {
  const group = groupsOf(ctx.accounts).get(outgoing.to);
  const sender: User = stanza.user;
  if (!group?.members.has(sender.phone)) {
    ctx.log.warn({ id: outgoing.id, to: outgoing.to }, 'message to a group the sender is not in dropped');
    return;
  }
  const senderJid = phoneJid(sender.phone, stanza.device.id);
  await distributeToPhones(ctx, queue, group, senderJid, outgoing);
  const skmsg = outgoing.encs.find((e) => e.type === 'skmsg');
  if (!skmsg) {
    ctx.log.warn({ id: outgoing.id, to: outgoing.to }, 'group message without an skmsg dropped');
    return;
  }
  forwardToCompanions(ctx, group, stanza, outgoing, skmsg);
  await decryptOnPhones(ctx, queue, group, stanza, outgoing, skmsg);
}
