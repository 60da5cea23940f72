/**
 * The platform's media encryption, implemented independently so Baileys is checked against it (the wire rules
 * are the ones Baileys' Utils/messages-media.js follows in `getMediaKeys`, `encryptedStream` and
 * `downloadEncryptedContent`):
 * - a random 32-byte `mediaKey` is expanded with HKDF-SHA256 (RFC 5869, no salt) to 112 bytes with the info
 *   `WhatsApp <Kind> Keys` (Image for images and stickers, Video, Audio for voice notes too, Document);
 *   bytes 0–15 are the AES IV, 16–47 the AES-256 key, 48–79 the HMAC key;
 * - the file on the media server is `AES-256-CBC(plaintext) ‖ HMAC-SHA256(macKey, iv ‖ ciphertext)[0..10]`;
 * - the message carries `fileSha256` = SHA-256(plaintext), `fileEncSha256` = SHA-256(the uploaded file),
 *   `fileLength` = plaintext bytes.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** The media types a message can carry, as Baileys names them (`MEDIA_HKDF_KEY_MAPPING` keys used here). */
export type MediaType = 'image' | 'video' | 'audio' | 'document' | 'sticker';

const HKDF_INFO: Record<MediaType, string> = {
  image: 'Image',
  sticker: 'Image',
  video: 'Video',
  audio: 'Audio',
  document: 'Document',
};

/** Upload path of each media type on the media server (Baileys Defaults `MEDIA_PATH_MAP`). */
export const MEDIA_PATHS: Record<MediaType, string> = {
  image: '/mms/image',
  sticker: '/mms/image',
  video: '/mms/video',
  audio: '/mms/audio',
  document: '/mms/document',
};

/** Keys derived from a media key. */
export interface MediaKeys {
  /** 16 bytes. */
  iv: Buffer;
  /** 32 bytes, AES-256-CBC. */
  cipherKey: Buffer;
  /** 32 bytes, HMAC-SHA256 (the file keeps its first 10 bytes of output). */
  macKey: Buffer;
}

/** Length of the MAC appended to an encrypted media file, bytes. */
export const MEDIA_MAC_LENGTH = 10;

/** Raised when an encrypted media file does not verify or decrypt; the message names the failed check. */
export class MediaCryptoError extends Error {
  override name = 'MediaCryptoError';
}

/**
 * Expands a 32-byte media key for `type`. @throws MediaCryptoError when the key is not 32 bytes.
 */
export function mediaKeys(mediaKey: Uint8Array, type: MediaType): MediaKeys {
  if (mediaKey.length !== 32) throw new MediaCryptoError(`mediaKey must be 32 bytes, got ${mediaKey.length}`);
  const expanded = Buffer.from(
    hkdfSync('sha256', mediaKey, Buffer.alloc(0), `WhatsApp ${HKDF_INFO[type]} Keys`, 112),
  );
  return {
    iv: expanded.subarray(0, 16),
    cipherKey: expanded.subarray(16, 48),
    macKey: expanded.subarray(48, 80),
  };
}

/** An encrypted media file and the fields a message carries about it. */
export interface EncryptedMedia {
  /** What goes to the media server: ciphertext ‖ 10-byte MAC. */
  file: Buffer;
  mediaKey: Buffer;
  /** SHA-256 of the plaintext. */
  fileSha256: Buffer;
  /** SHA-256 of {@link file}. */
  fileEncSha256: Buffer;
  /** Plaintext length, bytes. */
  fileLength: number;
}

/** Encrypts `plaintext` as a phone does before uploading it (a fresh media key unless one is given). */
export function encryptMedia(plaintext: Buffer, type: MediaType, mediaKey = randomBytes(32)): EncryptedMedia {
  const { iv, cipherKey, macKey } = mediaKeys(mediaKey, type);
  const cipher = createCipheriv('aes-256-cbc', cipherKey, iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const mac = createHmac('sha256', macKey)
    .update(iv)
    .update(ciphertext)
    .digest()
    .subarray(0, MEDIA_MAC_LENGTH);
  const file = Buffer.concat([ciphertext, mac]);
  return {
    file,
    mediaKey,
    fileSha256: sha256(plaintext),
    fileEncSha256: sha256(file),
    fileLength: plaintext.length,
  };
}

/** What a message says about its media file (the `…Message` fields of the proto). */
export interface MediaFields {
  mediaKey: Uint8Array;
  fileSha256?: Uint8Array | null;
  fileEncSha256?: Uint8Array | null;
  fileLength?: number | null;
}

/**
 * Verifies and decrypts a downloaded media file as a phone does: SHA-256 of the file against `fileEncSha256`,
 * the MAC against the media key, then AES-256-CBC, then SHA-256 and length of the plaintext against
 * `fileSha256` / `fileLength` (each checked when the message carries it).
 * @throws MediaCryptoError naming the first failed check.
 */
export function decryptMedia(file: Buffer, type: MediaType, fields: MediaFields): Buffer {
  if (fields.fileEncSha256 && !sha256(file).equals(Buffer.from(fields.fileEncSha256)))
    throw new MediaCryptoError('fileEncSha256 does not match the downloaded file');
  if (file.length < MEDIA_MAC_LENGTH + 16) throw new MediaCryptoError('file too short to be encrypted media');
  const { iv, cipherKey, macKey } = mediaKeys(fields.mediaKey, type);
  const ciphertext = file.subarray(0, file.length - MEDIA_MAC_LENGTH);
  const mac = createHmac('sha256', macKey)
    .update(iv)
    .update(ciphertext)
    .digest()
    .subarray(0, MEDIA_MAC_LENGTH);
  if (!mac.equals(file.subarray(file.length - MEDIA_MAC_LENGTH)))
    throw new MediaCryptoError('MAC does not match the media key');
  let plaintext: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-cbc', cipherKey, iv);
    plaintext = Buffer.concat([decipher.update(ciphertext), decipher.final()]);
  } catch (error) {
    throw new MediaCryptoError(`AES-256-CBC decryption failed: ${(error as Error).message}`);
  }
  if (fields.fileSha256 && !sha256(plaintext).equals(Buffer.from(fields.fileSha256)))
    throw new MediaCryptoError('fileSha256 does not match the decrypted bytes');
  if (typeof fields.fileLength === 'number' && fields.fileLength !== plaintext.length)
    throw new MediaCryptoError(`fileLength says ${fields.fileLength} bytes, decrypted ${plaintext.length}`);
  return plaintext;
}

/** SHA-256 digest. */
export function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

/** Base64url without padding, as Baileys puts a file's hash in upload URLs (`encodeBase64EncodedStringForUpload`). */
export function uploadToken(hash: Uint8Array): string {
  return Buffer.from(hash).toString('base64url');
}
