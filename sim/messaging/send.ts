/**
 * A simulated user sends a message to a linked account, as a phone does: it encrypts the Message to every
 * linked companion device of the account (fetching a pre-key bundle — and so sending a pkmsg — for devices it
 * has no session with yet), and the server delivers one `<message>` per device with the sender's LID as
 * `sender_lid` (signal/stanza.ts incomingMessageNode), now or at the device's next login.
 */
import { randomBytes } from 'node:crypto';
import type { proto } from 'baileys';
import { lidJid, phoneJid, type User } from '../model/accounts.ts';
import { incomingMessageNode, takeBundle } from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';

/** A message id as phones make them: 32 upper-case hex characters. */
export function newMessageId(): string {
  return randomBytes(16).toString('hex').toUpperCase();
}

/** Result of a send: the id and how many devices got it now (the others at their next login). */
export interface SendResult {
  id: string;
  devices: number;
  online: number;
}

/** Encrypts `message` from `from`'s phone to every linked companion of `to` and delivers it. */
export async function sendMessage(
  queue: KeyedQueue,
  from: User,
  to: User,
  message: proto.IMessage,
): Promise<SendResult> {
  const id = newMessageId();
  const companions = [...to.devices.values()].filter((d) => d.id !== 0 && d.linked && d.keys);
  let online = 0;
  await queue.run(from.phone, async () => {
    for (const device of companions) {
      const keys = device.keys;
      if (!keys) continue;
      const deviceJid = phoneJid(to.phone, device.id);
      if (!(await from.handset.hasSession(deviceJid)))
        await from.handset.startSession(deviceJid, takeBundle(keys));
      const enc = await from.handset.encryptMessage(deviceJid, message);
      const node = incomingMessageNode({
        id,
        from: phoneJid(from.phone),
        pushName: from.pushName,
        senderAlt: lidJid(from.lid),
        enc: [enc],
      });
      if (deliver(device, node) > 0) online++;
    }
  });
  return { id, devices: companions.length, online };
}
