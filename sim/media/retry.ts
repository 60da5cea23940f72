/**
 * The crypto of the platform's media re-upload ("media retry"), implemented independently so Baileys is checked
 * against it (the wire rules are the ones Baileys' Utils/messages-media.js follows in `getMediaRetryKey`,
 * `encryptMediaRetryRequest`, `decodeMediaRetryNode` and `decryptMediaRetryData`):
 * - the retry key is HKDF-SHA256 (RFC 5869, no salt) of the message's 32-byte `mediaKey` with the info
 *   `WhatsApp Media Retry Notification`, 32 bytes;
 * - both directions are AES-256-GCM under that key with a random 12-byte IV, the message id (UTF-8) as the
 *   additional data and the 16-byte tag after the ciphertext;
 * - the device's request (`<receipt type="server-error">`, `<encrypt><enc_p/><enc_iv/></encrypt>`) carries a
 *   `ServerErrorReceipt { stanzaId }`; the phone's answer (`<notification type="mediaretry">`, same children)
 *   carries a `MediaRetryNotification { stanzaId, directPath, result }`.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { type BinaryNode, proto } from 'baileys';

/** The `info` of the retry key's HKDF (Baileys' Utils/messages-media.js `getMediaRetryKey`). */
const RETRY_INFO = 'WhatsApp Media Retry Notification';

const TAG_BYTES = 16;

/** The result codes of a `MediaRetryNotification` (WAProto `MediaRetryNotification.ResultType`). */
export const RetryResult = proto.MediaRetryNotification.ResultType;

/** Raised when a retry request does not decrypt or decode; the message names the failed step. */
export class MediaRetryError extends Error {
  override name = 'MediaRetryError';
}

/** An encrypted retry payload as it travels in `<encrypt>`: `enc_p` (ciphertext ‖ tag) and `enc_iv` (12 bytes). */
export interface RetryCiphertext {
  ciphertext: Buffer;
  iv: Buffer;
}

/** The 32-byte retry key of a media key. @throws MediaRetryError when the media key is not 32 bytes. */
export function retryKey(mediaKey: Uint8Array): Buffer {
  if (mediaKey.length !== 32) throw new MediaRetryError(`mediaKey must be 32 bytes, got ${mediaKey.length}`);
  return Buffer.from(hkdfSync('sha256', mediaKey, Buffer.alloc(0), RETRY_INFO, 32));
}

function seal(plaintext: Uint8Array, mediaKey: Uint8Array, messageId: string): RetryCiphertext {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', retryKey(mediaKey), iv);
  cipher.setAAD(Buffer.from(messageId, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return { ciphertext, iv };
}

function open(data: RetryCiphertext, mediaKey: Uint8Array, messageId: string): Buffer {
  if (data.iv.length !== 12) throw new MediaRetryError(`enc_iv must be 12 bytes, got ${data.iv.length}`);
  if (data.ciphertext.length < TAG_BYTES) throw new MediaRetryError('enc_p is shorter than its GCM tag');
  const body = data.ciphertext.subarray(0, data.ciphertext.length - TAG_BYTES);
  const tag = data.ciphertext.subarray(data.ciphertext.length - TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', retryKey(mediaKey), data.iv);
  decipher.setAAD(Buffer.from(messageId, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    throw new MediaRetryError('enc_p does not decrypt with the retry key of the message (GCM tag mismatch)');
  }
}

/** The `<encrypt>` child of a retry stanza, or undefined when it has none or lacks `enc_p` / `enc_iv`. */
export function retryCiphertextOf(node: BinaryNode): RetryCiphertext | undefined {
  const children = Array.isArray(node.content) ? node.content : [];
  const encrypt = children.find((c) => c.tag === 'encrypt');
  const parts = Array.isArray(encrypt?.content) ? encrypt.content : [];
  const bytes = (tag: string) => {
    const content = parts.find((c) => c.tag === tag)?.content;
    return content instanceof Uint8Array ? Buffer.from(content) : undefined;
  };
  const ciphertext = bytes('enc_p');
  const iv = bytes('enc_iv');
  return ciphertext && iv ? { ciphertext, iv } : undefined;
}

/**
 * Decrypts a device's retry request and returns the `stanzaId` it names.
 * @throws MediaRetryError when it does not decrypt under the message's media key, does not decode, or names
 *   another message than `messageId`.
 */
export function decryptRetryRequest(data: RetryCiphertext, mediaKey: Uint8Array, messageId: string): string {
  const plaintext = open(data, mediaKey, messageId);
  let receipt: proto.ServerErrorReceipt;
  try {
    receipt = proto.ServerErrorReceipt.decode(plaintext);
  } catch (error) {
    throw new MediaRetryError(`ServerErrorReceipt does not decode: ${(error as Error).message}`);
  }
  if (receipt.stanzaId !== messageId)
    throw new MediaRetryError(`ServerErrorReceipt names ${receipt.stanzaId}, not ${messageId}`);
  return receipt.stanzaId;
}

/** Encrypts a retry request as a device does (the inverse of {@link decryptRetryRequest}; for tests). */
export function encryptRetryRequest(mediaKey: Uint8Array, messageId: string): RetryCiphertext {
  return seal(proto.ServerErrorReceipt.encode({ stanzaId: messageId }).finish(), mediaKey, messageId);
}

/**
 * Encrypts the phone's answer: `MediaRetryNotification { stanzaId: messageId, result, directPath }` (the direct
 * path only with a success).
 */
export function encryptRetryNotification(
  mediaKey: Uint8Array,
  messageId: string,
  answer: { result: proto.MediaRetryNotification.ResultType; directPath?: string },
): RetryCiphertext {
  const notification: proto.IMediaRetryNotification = { stanzaId: messageId, result: answer.result };
  if (answer.directPath !== undefined) notification.directPath = answer.directPath;
  return seal(proto.MediaRetryNotification.encode(notification).finish(), mediaKey, messageId);
}

/** Decrypts a phone's answer (the inverse of {@link encryptRetryNotification}; for tests). @throws MediaRetryError. */
export function decryptRetryNotification(
  data: RetryCiphertext,
  mediaKey: Uint8Array,
  messageId: string,
): proto.MediaRetryNotification {
  return proto.MediaRetryNotification.decode(open(data, mediaKey, messageId));
}
