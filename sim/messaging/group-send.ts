/**
 * A simulated member's phone sends a message to a group, as a phone does with Signal sender keys (Baileys
 * lib/Socket/messages-send.js relayMessage is the same protocol seen from a companion): the message is
 * encrypted once with the phone's sender key for the group (`skmsg`); every linked companion device of every
 * member (the sender's own included) that has not had that sender key yet first gets it in a 1:1 pkmsg/msg
 * holding `senderKeyDistributionMessage { groupId, axolotlSenderKeyDistributionMessage }`. Each device gets
 * one stanza: `from` = the group, `participant` = the sender's LID, `participant_pn` = its phone JID (none for a
 * sender who hides its phone, `hidesPhone`), `addressing_mode="lid"`, its pkmsg/msg (if any) and then the skmsg
 * (signal/stanza.ts incomingMessageNode).
 * Which devices hold the key is remembered per group and sender (Group.senderKeySent).
 */
import type { proto } from 'baileys';
import { type Device, lidJid, phoneJid, type User } from '../model/accounts.ts';
import type { Group } from '../model/groups.ts';
import { encryptToDevices, type FanoutTarget, incomingMessageNode } from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';
import { newMessageId, type SendResult } from './send.ts';

/**
 * Encrypts `message` from `from`'s phone to `group` and delivers it to the member companions, now or at their
 * next login. `devices` counts the companions of the other members, `online` those that got it now.
 * @throws SignalError when a device has neither a session with the sender nor published keys.
 */
export async function sendGroupMessage(
  queue: KeyedQueue,
  from: User,
  group: Group,
  message: proto.IMessage,
): Promise<SendResult> {
  const id = newMessageId();
  const recipients: { jid: string; device: Device; own: boolean }[] = [];
  for (const { user } of group.members.values()) {
    for (const device of user.devices.values()) {
      if (device.id === 0 || !device.linked || !device.keys) continue;
      recipients.push({ jid: phoneJid(user.phone, device.id), device, own: user === from });
    }
  }
  const sent = group.senderKeySent.get(from.phone) ?? new Set<string>();
  group.senderKeySent.set(from.phone, sent);
  let online = 0;
  await queue.run(from.phone, async () => {
    const { skmsg, distribution } = from.handset.encryptGroupMessage(group.jid, message);
    const needKey: FanoutTarget[] = recipients
      .filter((r) => !sent.has(r.jid))
      .map((r) => ({ jid: r.jid, ...(r.device.keys ? { keys: r.device.keys } : {}) }));
    const skdm: proto.IMessage = {
      senderKeyDistributionMessage: { groupId: group.jid, axolotlSenderKeyDistributionMessage: distribution },
    };
    const distributed = new Map(
      (await encryptToDevices(from.handset, needKey, skdm, group.jid)).map((c) => [c.jid, c.enc]),
    );
    from.sent.set(id, { message, to: group.jid });
    for (const recipient of recipients) {
      const pairwise = distributed.get(recipient.jid);
      const node = incomingMessageNode({
        id,
        from: group.jid,
        participant: lidJid(from.lid),
        // A member whose number the platform keeps private is named by LID alone, as in a 1:1 chat (send.ts).
        ...(from.hidesPhone ? {} : { senderAlt: phoneJid(from.phone) }),
        pushName: from.pushName,
        enc: [...(pairwise ? [pairwise] : []), { type: 'skmsg', ciphertext: skmsg }],
        attrs: { addressing_mode: 'lid' },
      });
      if (pairwise) sent.add(recipient.jid);
      if (deliver(recipient.device, node) > 0 && !recipient.own) online++;
    }
  });
  return { id, devices: recipients.filter((r) => !r.own).length, online };
}
