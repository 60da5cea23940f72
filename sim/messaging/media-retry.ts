/**
 * Media re-upload: a device whose download of a received file failed because the media host no longer has it
 * (404/410 after `DELETE /control/media`) asks the sender's phone to upload it again, as Baileys'
 * Socket/messages-send.js `updateMediaMessage` does: a `<receipt type="server-error">` with the message id, an
 * `<encrypt>` child holding a `ServerErrorReceipt` sealed with the message's media key (media/retry.ts) and an
 * `<rmr jid from_me participant/>` naming the message. The simulator plays the sender's phone:
 * - it finds the message it sent under that id (`User.sent`; the sender is `participant`, else `jid`, else the
 *   account itself when `from_me` is true) and decrypts the request with its media key;
 * - it uploads the file again when it still has it (`User.keptMedia`): the media server serves it at a new
 *   direct path, and the answer is `SUCCESS` with that path; `NOT_FOUND` when the phone deleted it
 *   (`DELETE /control/users/{phone}/media`), `DECRYPTION_ERROR` when the request does not decrypt,
 *   `GENERAL_ERROR` without a media server;
 * - it answers the requesting device with `<notification type="mediaretry" id=<message id>>` carrying the
 *   encrypted `MediaRetryNotification` and the same `<rmr>` (Baileys' Socket/messages-recv.js emits it as
 *   `messages.media-update`). When the simulator does not know the message at all (no media key to seal with),
 *   the notification carries `<error code="2"/>` (NOT_FOUND) instead, which Baileys' `decodeMediaRetryNode` reads.
 * Every request is recorded in {@link SimContext.mediaRetries} (`GET /control/media/retries`).
 */
import type { BinaryNode } from 'baileys';
import { mediaPart } from '../media/receive.ts';
import {
  decryptRetryRequest,
  encryptRetryNotification,
  MediaRetryError,
  RetryResult,
  retryCiphertextOf,
} from '../media/retry.ts';
import { SERVER_JID, type User } from '../model/accounts.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';
import { deliver } from './delivery.ts';

/** How a re-upload request ended, as `GET /control/media/retries` names it. */
export type MediaRetryOutcome =
  | 'success'
  | 'not_found'
  | 'decryption_error'
  | 'general_error'
  | 'unknown_message';

/** One re-upload request a device sent. */
export interface MediaRetryRecord {
  /** The message id the request names. */
  id: string;
  /** Phone of the account whose device asked. */
  from: string;
  /** Id of the device that asked. */
  device: number;
  /** Phone of the user who sent the message (whose phone was asked), when known. */
  sender?: string;
  outcome: MediaRetryOutcome;
  /** The new direct path, with `success`. */
  directPath?: string;
  /** When the request arrived, RFC 3339. */
  at: string;
}

/** Is `node` a device's media re-upload request? */
export function isMediaRetryRequest(node: BinaryNode): boolean {
  return node.tag === 'receipt' && node.attrs.type === 'server-error';
}

function child(node: BinaryNode, tag: string): BinaryNode | undefined {
  return Array.isArray(node.content) ? node.content.find((c) => c.tag === tag) : undefined;
}

/** The user who sent the message an `<rmr>` names, for a request from `asker`. */
function senderOf(ctx: SimContext, asker: User, rmr: BinaryNode | undefined): User | undefined {
  if (!rmr) return undefined;
  if (rmr.attrs.from_me === 'true') return asker;
  const jid = rmr.attrs.participant ?? rmr.attrs.jid;
  return jid ? ctx.accounts.resolve(jid)?.user : undefined;
}

const OUTCOMES: Record<number, MediaRetryOutcome> = {
  [RetryResult.SUCCESS]: 'success',
  [RetryResult.NOT_FOUND]: 'not_found',
  [RetryResult.DECRYPTION_ERROR]: 'decryption_error',
  [RetryResult.GENERAL_ERROR]: 'general_error',
};

/**
 * Answers a device's `<receipt type="server-error">` as the sender's phone (see the module comment). Never
 * throws: every outcome is an answer to the device.
 */
export function answerMediaRetry(
  ctx: SimContext,
  { user, device, node }: Pick<DeviceStanza, 'user' | 'device' | 'node'>,
): void {
  const id = node.attrs.id ?? '';
  const rmr = child(node, 'rmr');
  const sender = senderOf(ctx, user, rmr);
  const sent = sender?.sent.get(id);
  const found = sent ? mediaPart(sent.message) : undefined;
  const mediaKey = found?.part.mediaKey;
  const record: MediaRetryRecord = {
    id,
    from: user.phone,
    device: device.id,
    ...(sender ? { sender: sender.phone } : {}),
    outcome: 'unknown_message',
    at: new Date().toISOString(),
  };
  const rmrNode: BinaryNode = { tag: 'rmr', attrs: { ...(rmr?.attrs ?? {}) } };
  const attrs = { id, from: SERVER_JID, type: 'mediaretry', t: String(Math.floor(Date.now() / 1000)) };
  if (!found || !mediaKey || mediaKey.length !== 32) {
    ctx.mediaRetries.push(record);
    ctx.events.emit('media-retry', record);
    ctx.log.info({ id, sender: sender?.phone }, 'media retry for a message the simulator did not relay');
    deliver(device, {
      tag: 'notification',
      attrs,
      content: [rmrNode, { tag: 'error', attrs: { code: '2' } }],
    });
    return;
  }
  let result: number;
  let directPath: string | undefined;
  const data = retryCiphertextOf(node);
  try {
    if (!data) throw new MediaRetryError('the request has no <encrypt><enc_p/><enc_iv/></encrypt>');
    decryptRetryRequest(data, mediaKey, id);
    const hash = found.part.fileEncSha256 ? Buffer.from(found.part.fileEncSha256).toString('base64') : '';
    const file = sender?.keptMedia?.get(hash);
    if (!ctx.media) result = RetryResult.GENERAL_ERROR;
    else if (!file) result = RetryResult.NOT_FOUND;
    else {
      directPath = ctx.media.put(found.type === 'sticker' ? 'image' : found.type, file).directPath;
      result = RetryResult.SUCCESS;
    }
  } catch (error) {
    ctx.log.info({ id, reason: (error as Error).message }, 'media retry request did not decrypt');
    result = RetryResult.DECRYPTION_ERROR;
  }
  record.outcome = OUTCOMES[result] ?? 'general_error';
  if (directPath !== undefined) record.directPath = directPath;
  ctx.mediaRetries.push(record);
  ctx.events.emit('media-retry', record);
  const sealed = encryptRetryNotification(mediaKey, id, {
    result,
    ...(directPath !== undefined ? { directPath } : {}),
  });
  deliver(device, {
    tag: 'notification',
    attrs,
    content: [
      {
        tag: 'encrypt',
        attrs: {},
        content: [
          { tag: 'enc_p', attrs: {}, content: sealed.ciphertext },
          { tag: 'enc_iv', attrs: {}, content: sealed.iv },
        ],
      },
      rmrNode,
    ],
  });
}
