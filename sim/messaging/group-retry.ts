/**
 * A linked device could not decrypt a group message a simulated member sent (most often: it lacks the member's
 * sender key) and answers `<receipt type="retry" to="<group>" participant="<member>">` (Baileys
 * lib/Socket/messages-recv.js sendRetryRequest). The member's phone does what a phone does: it opens a fresh
 * 1:1 session with that device (the bundle in the receipt, else the device's published keys) and sends the same
 * message again, pairwise encrypted, in a group stanza (`from` = the group, `participant` = the member's LID,
 * `<enc type="pkmsg" count=N>`). It also forgets that the device holds its sender key, so the member's next
 * group message hands the key to it again.
 */
import { lidJid, phoneJid } from '../model/accounts.ts';
import { groupsOf } from '../model/groups.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import { answerRetry, incomingMessageNode, parseRetryReceipt } from '../signal/index.ts';
import { deliver, type KeyedQueue } from './delivery.ts';

/**
 * Answers a retry receipt for a group message (see the module comment); a receipt for a message no simulated
 * member sent to that group is logged and ignored.
 * @throws SignalError when neither the receipt nor the device's published keys hold a bundle.
 */
export async function answerGroupRetry(
  ctx: SimContext,
  queue: KeyedQueue,
  { user, device, node }: DeviceStanza,
): Promise<void> {
  const deviceJid = phoneJid(user.phone, device.id);
  const retry = parseRetryReceipt(node, deviceJid);
  const group = retry ? groupsOf(ctx.accounts).get(retry.to) : undefined;
  const sender = retry?.participant ? ctx.accounts.resolve(retry.participant)?.user : undefined;
  const original = retry && sender ? sender.sent.get(retry.id) : undefined;
  if (!retry || !group || !sender || original?.to !== group.jid) {
    ctx.log.info(
      { id: node.attrs.id, to: node.attrs.to, participant: node.attrs.participant },
      'group retry receipt for a message no simulated member sent',
    );
    return;
  }
  const enc = await queue.run(sender.phone, () =>
    answerRetry(sender.handset, retry, original.message, device.keys),
  );
  group.senderKeySent.get(sender.phone)?.delete(deviceJid);
  deliver(
    device,
    incomingMessageNode({
      id: retry.id,
      from: group.jid,
      participant: lidJid(sender.lid),
      ...(sender.hidesPhone ? {} : { senderAlt: phoneJid(sender.phone) }),
      pushName: sender.pushName,
      enc: [{ ...enc, attrs: { count: String(retry.count) } }],
      attrs: { addressing_mode: 'lid' },
    }),
  );
  ctx.events.emit('retry', { user: sender, id: retry.id, device: deviceJid, count: retry.count });
}
