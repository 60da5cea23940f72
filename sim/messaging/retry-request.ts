/**
 * A simulated phone that could not decrypt a message a linked device sent asks that device for it again, as the
 * platform's phones do: a `<receipt type="retry">` delivered to the sending device, holding `<retry count id t v>`
 * and the phone's `<registration>` and, from the second request on, a fresh bundle in `<keys>` (type, identity,
 * one one-time pre-key, signed pre-key). The shape is the one Baileys writes for the same purpose
 * (lib/Socket/messages-recv.js sendRetryRequest) and reads back (sendMessagesAgain,
 * Utils/signal.js extractE2ESessionFromRetryReceipt): Baileys answers with the message again, from its
 * `getMessage`, in a fresh session (from the bundle, else from a key fetch it forces), as a pkmsg.
 *
 * When it happens: a device whose Signal state went back in time (a process killed after sending and before its
 * key store held the new ratchet state, then restored by another process) encrypts with message keys the phone
 * has already used, and the phone cannot decrypt. Without the request the message would be lost.
 */
import type { BinaryNode } from 'baileys';
import type { Device, User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { bigEndian, KEY_TYPE_DJB, preKeyNode, signedPreKeyNode, takeBundle } from '../signal/keys.ts';
import { deliver } from './delivery.ts';

/** Most retry receipts a phone sends for one message of one device (Baileys' default `maxMsgRetryCount`). */
export const MAX_RETRY_REQUESTS = 5;

/** One-time pre-keys a phone adds when a retry needs one and none is left to hand out. */
const PRE_KEYS_ADDED = 10;

/** Retry receipts sent per phone, by `<sending device JID>|<message id>`. Not kept in the state file. */
const sent = new WeakMap<User, Map<string, number>>();

/** A message a phone could not decrypt. */
export interface UndecryptedMessage {
  /** The phone (device 0) that could not decrypt. */
  phone: User;
  /** The device that sent the message, and its JID (`<phone>:<device>@s.whatsapp.net`). */
  sender: Device;
  senderJid: string;
  /** The message id. */
  id: string;
  /** The JID the sender addressed the phone by (`<to jid>` of its `<message>`): the receipt's `from`. */
  addressedAs: string;
  /** For the sender's own phone (a deviceSentMessage copy): the chat the message went to. */
  recipient?: string;
}

/** What {@link requestRetry} published on the context's events as `retry-request`. */
export interface RetryRequestEvent {
  user: User;
  id: string;
  device: string;
  count: number;
  /** True when the receipt carried a fresh bundle (`<keys>`). */
  keys: boolean;
}

/** The `<keys>` child of a retry receipt: a bundle of the phone's, one one-time pre-key taken from its published keys. */
function keysNode(phone: User): BinaryNode {
  const published = phone.handset.keys;
  if (published.preKeys.size === 0) phone.handset.addPreKeys(PRE_KEYS_ADDED);
  const bundle = takeBundle(published);
  const content: BinaryNode[] = [
    { tag: 'type', attrs: {}, content: Buffer.from([KEY_TYPE_DJB]) },
    { tag: 'identity', attrs: {}, content: bundle.identity },
  ];
  if (bundle.preKey) content.push(preKeyNode(bundle.preKey));
  content.push(signedPreKeyNode(bundle.signedPreKey));
  return { tag: 'keys', attrs: {}, content };
}

/**
 * Sends the sending device a retry receipt for `message` (see the module comment) and publishes
 * `retry-request` ({@link RetryRequestEvent}) on the context's events.
 * @returns the retry count sent (1 for the first request), or undefined when {@link MAX_RETRY_REQUESTS} were
 *   already sent for this message and device (then nothing is sent).
 */
export function requestRetry(ctx: SimContext, message: UndecryptedMessage): number | undefined {
  const { phone, sender, senderJid, id } = message;
  let counts = sent.get(phone);
  if (!counts) {
    counts = new Map();
    sent.set(phone, counts);
  }
  const key = `${senderJid}|${id}`;
  const count = (counts.get(key) ?? 0) + 1;
  if (count > MAX_RETRY_REQUESTS) return undefined;
  counts.set(key, count);
  const t = String(Math.floor(Date.now() / 1000));
  const content: BinaryNode[] = [
    { tag: 'retry', attrs: { count: String(count), id, t, v: '1', error: '0' } },
    { tag: 'registration', attrs: {}, content: bigEndian(phone.handset.registrationId, 4) },
  ];
  const withKeys = count > 1;
  if (withKeys) content.push(keysNode(phone));
  deliver(sender, {
    tag: 'receipt',
    attrs: {
      from: message.addressedAs,
      id,
      type: 'retry',
      t,
      ...(message.recipient ? { recipient: message.recipient } : {}),
    },
    content,
  });
  const event: RetryRequestEvent = { user: phone, id, device: senderJid, count, keys: withKeys };
  ctx.events.emit('retry-request', event);
  return count;
}
