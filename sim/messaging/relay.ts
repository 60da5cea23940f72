/**
 * What linked Baileys devices send, as the platform's server relays it (Baileys' Socket/messages-send.js
 * relayMessage and sendReceipt shapes):
 * - `<message>`: one ciphertext per recipient device (`<participants><to jid><enc/></to>…`). Ciphertexts for a
 *   simulated phone (device :0) are decrypted with that user's Signal identity and land in its inbox — the
 *   sender's own phone gets a deviceSentMessage copy (DSM), decrypted too but not an inbox entry. Ciphertexts
 *   for another companion device are forwarded to it as an incoming `<message>`.
 * - `<message>` to a group (`…@g.us`): fanned out with its sender-key distribution, see group-relay.ts; to
 *   `status@broadcast` (a status update): fanned out to the devices it names, see status-relay.ts.
 * - `<receipt>`: recorded in the inbox of the user the receipt is addressed to (for a group message: the
 *   `participant` it names, with `group` set); a retry receipt is answered here (1:1) or in group-retry.ts; a media re-upload request (`type="server-error"`)
 *   is answered by the sender's phone in media-retry.ts.
 * A ciphertext that does not decrypt, or a pkmsg whose attached device identity the account did not sign, is
 * logged and published as `decrypt-error` on the context's events; a simulated phone that could not decrypt asks
 * the sending device for the message again (retry-request.ts).
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren } from 'baileys';
import { completeMedia } from '../media/receive.ts';
import { lidJid, phoneJid } from '../model/accounts.ts';
import { entryFromMessage } from '../model/inbox.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import {
  answerRetry,
  asCiphertext,
  incomingMessageNode,
  parseOutgoingMessage,
  parseRetryReceipt,
  verifyDeviceIdentity,
} from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';
import { isGroupJid, relayGroupMessage } from './group-relay.ts';
import { answerGroupRetry } from './group-retry.ts';
import { answerMediaRetry, isMediaRetryRequest } from './media-retry.ts';
import { rememberPoll } from './polls.ts';
import { requestRetry } from './retry-request.ts';
import { senderAddressing } from './send.ts';
import { relayStatusMessage, STATUS_JID } from './status-relay.ts';

async function relayMessage(ctx: SimContext, queue: KeyedQueue, stanza: DeviceStanza): Promise<void> {
  const { user, device, node } = stanza;
  const outgoing = parseOutgoingMessage(node);
  const senderJid = phoneJid(user.phone, device.id);
  const timestamp = new Date().toISOString();
  // A companion's pkmsg carries its ADV identity; phones check it against the account before trusting the
  // new session (signal/identity.ts). A bad identity is refused like an undecryptable message.
  if (outgoing.deviceIdentity && device.keys && outgoing.encs.some((e) => e.type === 'pkmsg')) {
    try {
      verifyDeviceIdentity(outgoing.deviceIdentity, user.accountKey.public, device.keys.identity);
    } catch (error) {
      ctx.log.warn(
        { err: error, id: outgoing.id, from: senderJid },
        'message with an invalid device identity refused',
      );
      ctx.events.emit('decrypt-error', { user, id: outgoing.id, from: senderJid, error });
      return;
    }
  }
  if (isGroupJid(outgoing.to)) return relayGroupMessage(ctx, queue, stanza, outgoing);
  if (outgoing.to === STATUS_JID) return relayStatusMessage(ctx, queue, stanza, outgoing);
  for (const enc of outgoing.encs) {
    const target = ctx.accounts.resolve(enc.jid);
    if (!target) {
      ctx.log.warn({ jid: enc.jid, id: outgoing.id }, 'message for an unknown device dropped');
      continue;
    }
    const { user: recipient, device: deviceId } = target;
    if (deviceId !== 0) {
      const targetDevice = recipient.devices.get(deviceId);
      if (!targetDevice?.linked || targetDevice === device) continue;
      const forwarded = incomingMessageNode({
        id: outgoing.id,
        // Own companions see the account's phone JID with the chat as recipient; other users' devices see
        // the sending device by LID, the phone JID beside it (as send.ts senderAddressing).
        ...(recipient === user
          ? { from: phoneJid(user.phone), senderAlt: lidJid(user.lid) }
          : { from: lidJid(user.lid, device.id), senderAlt: phoneJid(user.phone) }),
        type: outgoing.type,
        pushName: user.pushName,
        enc: [{ type: enc.type, ciphertext: enc.ciphertext, attrs: enc.attrs }],
        ...(recipient === user ? { recipient: outgoing.to } : {}),
        ...(outgoing.deviceIdentity ? { deviceIdentity: outgoing.deviceIdentity } : {}),
      });
      deliver(targetDevice, forwarded);
      continue;
    }
    let decoded: Awaited<ReturnType<typeof recipient.handset.decryptMessage>>;
    try {
      decoded = await queue.run(recipient.phone, () =>
        recipient.handset.decryptMessage(senderJid, asCiphertext(enc)),
      );
    } catch (error) {
      ctx.log.warn(
        { err: error, id: outgoing.id, to: enc.jid, from: senderJid },
        'could not decrypt a message; asking the sender for it again',
      );
      ctx.events.emit('decrypt-error', { user: recipient, id: outgoing.id, from: senderJid, error });
      requestRetry(ctx, {
        phone: recipient,
        sender: device,
        senderJid,
        id: outgoing.id,
        addressedAs: enc.jid,
        ...(recipient === user ? { recipient: outgoing.to } : {}),
      });
      continue;
    }
    try {
      if (recipient === user) {
        ctx.events.emit('sent', {
          user,
          id: outgoing.id,
          to: decoded.destinationJid,
          message: decoded.message,
        });
        continue;
      }
      const entry = entryFromMessage(
        { id: outgoing.id, from: user.phone, fromDevice: device.id, timestamp },
        decoded.message,
      );
      // A phone shows one message per id and sender: a second copy (a sender relaying again after a crash) is
      // counted on the first entry, not shown again.
      const seen = recipient.inbox.find(
        (e) => e.id === entry.id && e.from === entry.from && e.type === entry.type,
      );
      if (seen) {
        seen.copies = (seen.copies ?? 0) + 1;
        continue;
      }
      await completeMedia(entry, decoded.message, ctx);
      rememberPoll(recipient, entry, decoded.message);
      recipient.inbox.push(entry);
      ctx.events.emit('inbox', { user: recipient, entry });
    } catch (error) {
      ctx.log.warn({ err: error, id: outgoing.id, to: enc.jid }, 'a decrypted message was not taken');
    }
  }
}

/**
 * A device could not decrypt a message a simulated user sent (Baileys' sendRetryRequest): the user's phone
 * opens a fresh session (the bundle in the receipt, else a fetched one) and sends the same message again
 * with the retry count on the `<enc>`.
 */
async function answerRetryReceipt(
  ctx: SimContext,
  queue: KeyedQueue,
  { user, device, node }: DeviceStanza,
): Promise<void> {
  const deviceJid = phoneJid(user.phone, device.id);
  const retry = parseRetryReceipt(node, deviceJid);
  const sender = retry ? ctx.accounts.resolve(retry.to)?.user : undefined;
  const original = retry && sender ? sender.sent.get(retry.id) : undefined;
  if (!retry || !sender || !original) {
    ctx.log.info(
      { id: node.attrs.id, to: node.attrs.to },
      'retry receipt for a message the simulator did not send',
    );
    return;
  }
  const own = sender === user;
  const message = own
    ? { deviceSentMessage: { destinationJid: original.to, message: original.message } }
    : original.message;
  const enc = await queue.run(sender.phone, () => answerRetry(sender.handset, retry, message, device.keys));
  deliver(
    device,
    incomingMessageNode({
      id: retry.id,
      ...senderAddressing(sender, own),
      pushName: sender.pushName,
      enc: [{ ...enc, attrs: { count: String(retry.count) } }],
      ...(own ? { recipient: original.to } : {}),
    }),
  );
  ctx.events.emit('retry', { user: sender, id: retry.id, device: deviceJid, count: retry.count });
}

function recordReceipt(ctx: SimContext, { user, device, node }: DeviceStanza): void {
  // A receipt for a group message names the group in `to` and the message's sender in `participant`.
  const group = node.attrs.to && isGroupJid(node.attrs.to) ? node.attrs.to : undefined;
  const to = group ? node.attrs.participant : node.attrs.to;
  const target = to ? ctx.accounts.resolve(to) : undefined;
  if (!target || target.user === user) return;
  const first = node.attrs.id;
  if (!first) return;
  const list = getBinaryNodeChild(node, 'list');
  const ids = [first, ...getBinaryNodeChildren(list, 'item').map((i) => i.attrs.id ?? '')].filter(
    (id) => id !== '',
  );
  const entry = {
    id: first,
    from: user.phone,
    fromDevice: device.id,
    type: 'receipt',
    timestamp: new Date().toISOString(),
    receipt: node.attrs.type ?? 'delivery',
    ids,
    ...(group ? { group } : {}),
  };
  target.user.inbox.push(entry);
  ctx.events.emit('inbox', { user: target.user, entry });
}

/** Subscribes the relay to the context's device stanzas. */
export function startRelay(ctx: SimContext, queue: KeyedQueue): void {
  ctx.events.on('stanza', (stanza: DeviceStanza) => {
    const node: BinaryNode = stanza.node;
    if (node.tag === 'receipt' && node.attrs.type === 'retry') {
      const answer = isGroupJid(node.attrs.to ?? '') ? answerGroupRetry : answerRetryReceipt;
      answer(ctx, queue, stanza).catch((error: unknown) =>
        ctx.log.warn({ err: error, id: node.attrs.id }, 'retry receipt not answered'),
      );
    } else if (isMediaRetryRequest(node)) answerMediaRetry(ctx, stanza);
    else if (node.tag === 'receipt') recordReceipt(ctx, stanza);
    else if (node.tag === 'message') {
      relayMessage(ctx, queue, stanza).catch((error: unknown) =>
        ctx.log.warn({ err: error, id: node.attrs.id }, 'message stanza not relayed'),
      );
    }
  });
}
