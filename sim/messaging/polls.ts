/**
 * Polls as a simulated phone handles them. A poll arrives with a 32-byte `messageContextInfo.messageSecret`; the
 * phone keeps it, and a vote is a `pollUpdateMessage` whose `vote` is the `PollVoteMessage` (SHA-256 digests of
 * the chosen option names) encrypted with AES-256-GCM under a key derived from that secret — the inverse of
 * Baileys' Utils/process-message.js `decryptPollVote`:
 *   key0 = HMAC-SHA256(key = 32 zero bytes, data = secret)
 *   key  = HMAC-SHA256(key = key0, data = pollId ‖ creatorJid ‖ voterJid ‖ "Poll Vote" ‖ 0x01)
 *   encPayload = AES-256-GCM(key, iv = 12 random bytes, aad = pollId ‖ 0x00 ‖ voterJid) ‖ 16-byte tag
 * The simulated phone names the poll's creator and the voter by their phone JIDs (`<digits>@s.whatsapp.net`,
 * no device), which is what Baileys' `getKeyAuthor` gives for a 1:1 chat whose sender carries `sender_pn`.
 */
import { createCipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { proto } from 'baileys';
import type { User } from '../model/accounts.ts';
import type { InboxEntry } from '../model/inbox.ts';

/** A poll a simulated user received: its secret, options, who created it (phone digits), and its group if any. */
export interface ReceivedPoll {
  secret: Buffer;
  options: string[];
  selectableCount: number;
  creator: string;
  /** The group JID when the poll was sent to a group. */
  group?: string;
}

const received = new WeakMap<User, Map<string, ReceivedPoll>>();

/** Keeps the secret of a poll `user` just received (`entry` from model/inbox.ts, `message` decrypted). */
export function rememberPoll(user: User, entry: InboxEntry, message: proto.IMessage): void {
  const secret = message.messageContextInfo?.messageSecret;
  if (entry.type !== 'poll' || !entry.poll || !secret) return;
  let polls = received.get(user);
  if (!polls) {
    polls = new Map();
    received.set(user, polls);
  }
  polls.set(entry.id, {
    secret: Buffer.from(secret),
    options: entry.poll.options,
    selectableCount: entry.poll.selectableCount,
    creator: entry.from,
    ...(entry.group ? { group: entry.group } : {}),
  });
}

/** The poll `id` that `user` received, if any. */
export function receivedPoll(user: User, id: string): ReceivedPoll | undefined {
  return received.get(user)?.get(id);
}

/** The encrypted vote for option names `chosen` (see the file comment), ready for `pollUpdateMessage.vote`. */
export function encryptVote(
  poll: Pick<ReceivedPoll, 'secret'>,
  ids: { pollId: string; creatorJid: string; voterJid: string },
  chosen: readonly string[],
): { encPayload: Buffer; encIv: Buffer } {
  const plaintext = proto.Message.PollVoteMessage.encode({
    selectedOptions: chosen.map((name) => createHash('sha256').update(name, 'utf8').digest()),
  }).finish();
  const key0 = createHmac('sha256', Buffer.alloc(32)).update(poll.secret).digest();
  const sign = Buffer.concat([
    Buffer.from(ids.pollId),
    Buffer.from(ids.creatorJid),
    Buffer.from(ids.voterJid),
    Buffer.from('Poll Vote'),
    Buffer.from([1]),
  ]);
  const key = createHmac('sha256', key0).update(sign).digest();
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(`${ids.pollId}\u0000${ids.voterJid}`));
  const encPayload = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return { encPayload, encIv: iv };
}
