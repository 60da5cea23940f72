import {
  type BaileysEventMap,
  decryptMediaRetryData,
  encryptMediaRetryRequest,
  jidNormalizedUser,
  proto,
  type WAMessageKey,
} from 'baileys';
import { DomainError } from '../../domain/errors.ts';
import { type EngineMessage, STATUS_BROADCAST } from '../../domain/messages.ts';
import type { SocketLike } from './socket.ts';

/**
 * Asking the sender's phone to upload a received media file again once the platform's link expired
 * (docs/decisions/0046-media-re-upload.md), as Baileys' Socket/messages-send.js `updateMediaMessage` does — with
 * Baileys' own Utils/messages-media.js `encryptMediaRetryRequest` (a `<receipt type="server-error">` carrying an
 * AES-GCM sealed `ServerErrorReceipt`) and `decryptMediaRetryData` (the `<notification type="mediaretry">` answer,
 * which Baileys' Socket/messages-recv.js emits as `messages.media-update`) — but bounded: Baileys waits for the
 * answer without a time limit, parley gives up after {@link MEDIA_REUPLOAD_TIMEOUT_MS}.
 */

/** How long parley waits for the phone's answer to a re-upload request, ms. */
export const MEDIA_REUPLOAD_TIMEOUT_MS = 8_000;

/**
 * Media host statuses after which the phone is asked to upload again: Baileys' Utils/messages.js
 * `REUPLOAD_REQUIRED_STATUS` (404, 410). A 403 (a link whose signature or `oe` expiry fails) is answered as gone.
 */
export const REUPLOAD_STATUSES: ReadonlySet<number> = new Set([404, 410]);

/** What a phone says about a file it cannot upload again, by `MediaRetryNotification.ResultType`. */
const FAILURES: Record<number, string> = {
  [proto.MediaRetryNotification.ResultType.NOT_FOUND]: 'it no longer has the file (NOT_FOUND)',
  [proto.MediaRetryNotification.ResultType.DECRYPTION_ERROR]:
    'it could not read the request (DECRYPTION_ERROR)',
  [proto.MediaRetryNotification.ResultType.GENERAL_ERROR]: 'it failed to upload the file (GENERAL_ERROR)',
};

/** The socket side a re-upload request needs. */
export type ReuploadSocket = Pick<SocketLike, 'ev' | 'user' | 'sendNode'>;

/**
 * The platform key of a stored received message: the chat, whether it is the account's, and who sent it
 * (`participant`) where the chat is not the sender — a group, or `status@broadcast` for a contact's status (the
 * poster), as Baileys' Utils/decode-wa-message.js keys such messages and its `encryptMediaRetryRequest` writes
 * the `<rmr participant>` the phone needs to find the message.
 */
export function platformKeyOf(message: EngineMessage): WAMessageKey {
  const { chat, sender, isFromMe, isGroup } = message.source;
  const shared = isGroup || chat === STATUS_BROADCAST;
  return {
    id: message.id,
    remoteJid: chat,
    fromMe: isFromMe,
    ...(shared && !isFromMe && sender ? { participant: sender } : {}),
  };
}

/**
 * The error of a failed re-upload of message `messageId`'s media: DomainError `gone` (HTTP 410) ending in `why`.
 */
export function reuploadRefused(messageId: string, why: string): DomainError {
  return new DomainError(
    'gone',
    `the platform no longer has the media of message ${messageId} (its media links expire after a while), parley had not kept a copy, and the sender's phone could not upload it again: ${why}`,
  );
}

/**
 * Sends one re-upload request for `message` over `sock` and waits at most `timeoutMs` for the phone's answer.
 * Resolves with the new direct path (`/v/t62…?…`) the media host serves the file at.
 * @param mediaKey the message's 32-byte media key (seals the request and opens the answer).
 * @throws DomainError gone when the phone answers that it cannot (its result code in the message), the answer
 *   does not decrypt, or no answer comes within `timeoutMs`; the socket's error when the request cannot be sent.
 */
export async function requestMediaReupload(
  sock: ReuploadSocket,
  message: EngineMessage,
  mediaKey: Buffer,
  timeoutMs = MEDIA_REUPLOAD_TIMEOUT_MS,
): Promise<string> {
  const me = sock.user?.id;
  if (!me) throw new DomainError('not_connected', 'instance is not connected');
  const key = platformKeyOf(message);
  const node = encryptMediaRetryRequest(key, mediaKey, jidNormalizedUser(me));
  let listener: ((updates: BaileysEventMap['messages.media-update']) => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const answer = new Promise<string>((resolve, reject) => {
    listener = (updates) => {
      const update = updates.find((u) => u.key.id === message.id);
      if (!update) return;
      if (update.error || !update.media) {
        reject(reuploadRefused(message.id, update.error?.message ?? 'its answer carried no file'));
        return;
      }
      let result: proto.MediaRetryNotification;
      try {
        result = decryptMediaRetryData(update.media, mediaKey, message.id);
      } catch (error) {
        reject(reuploadRefused(message.id, `its answer did not decrypt (${(error as Error).message})`));
        return;
      }
      const code = result.result ?? proto.MediaRetryNotification.ResultType.GENERAL_ERROR;
      if (code !== proto.MediaRetryNotification.ResultType.SUCCESS || !result.directPath) {
        reject(reuploadRefused(message.id, FAILURES[code] ?? `it answered result ${code}`));
        return;
      }
      resolve(result.directPath);
    };
    sock.ev.on('messages.media-update', listener);
    timer = setTimeout(
      () => reject(reuploadRefused(message.id, `it did not answer within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
  });
  // Settled before the request is sent only when the phone answers early; handled below either way.
  answer.catch(() => undefined);
  try {
    await sock.sendNode(node);
    return await answer;
  } finally {
    clearTimeout(timer);
    if (listener) sock.ev.off('messages.media-update', listener);
  }
}
