/**
 * What a simulated phone does with a media message it decrypted: it downloads the file from the media server
 * by the message's direct path (over HTTPS, as Baileys' `downloadContentFromMessage` does), verifies
 * `fileEncSha256`, the MAC, `fileSha256` and `fileLength`, decrypts it (media/crypto.ts), and records in the
 * inbox entry the plaintext's SHA-256 and length — and, for stickers, the pack metadata in the WEBP's EXIF.
 */
import type { proto } from 'baileys';
import webpmux from 'node-webpmux';
import type { InboxEntry } from '../model/inbox.ts';
import type { SimContext } from '../server/session.ts';
import { decryptMedia, type MediaType, sha256 } from './crypto.ts';
import type { MediaServer } from './server.ts';

type MediaMessage = proto.Message.IImageMessage & {
  fileName?: string | null;
  ptt?: boolean | null;
  isAnimated?: boolean | null;
};

/** Unwraps ephemeral, view-once and document-with-caption envelopes. */
function unwrap(message: proto.IMessage): proto.IMessage {
  const inner =
    message.ephemeralMessage?.message ??
    message.viewOnceMessage?.message ??
    message.viewOnceMessageV2?.message ??
    message.documentWithCaptionMessage?.message;
  return inner ? unwrap(inner) : message;
}

/** The media part of a message and its HKDF type, or undefined when it carries none. */
export function mediaPart(message: proto.IMessage): { type: MediaType; part: MediaMessage } | undefined {
  const m = unwrap(message);
  if (m.imageMessage) return { type: 'image', part: m.imageMessage };
  if (m.videoMessage) return { type: 'video', part: m.videoMessage };
  if (m.audioMessage) return { type: 'audio', part: m.audioMessage };
  if (m.documentMessage) return { type: 'document', part: m.documentMessage };
  if (m.stickerMessage) return { type: 'sticker', part: m.stickerMessage };
  return undefined;
}

/**
 * The sticker pack fields of a WEBP's EXIF chunk (the JSON after the platform's TIFF header: `sticker-pack-id`,
 * `sticker-pack-name`, `sticker-pack-publisher`, `emojis`); undefined when the file has no such EXIF.
 */
export async function stickerPack(webp: Buffer): Promise<InboxEntry['sticker']> {
  const image = new webpmux.Image();
  await image.load(webp);
  const exif: Buffer | undefined = image.exif ?? undefined;
  if (!exif) return undefined;
  const start = exif.indexOf('{');
  const end = exif.lastIndexOf('}');
  if (start < 0 || end < start) return undefined;
  const json = JSON.parse(exif.subarray(start, end + 1).toString('utf8')) as Record<string, unknown>;
  const pack: NonNullable<InboxEntry['sticker']> = {};
  const fields = [
    ['sticker-pack-id', 'packId'],
    ['sticker-pack-name', 'packName'],
    ['sticker-pack-publisher', 'packPublisher'],
  ] as const;
  for (const [key, field] of fields) {
    const value = json[key];
    if (typeof value === 'string') pack[field] = value;
  }
  if (Array.isArray(json.emojis)) pack.emojis = json.emojis.map(String);
  return pack;
}

/** The media part of each inbox entry whose media decrypted, so the bytes can be served again on demand. */
const received = new WeakMap<InboxEntry, { type: MediaType; part: MediaMessage }>();

/** Downloads the file `part` points at from `server` and verifies and decrypts it (MediaCryptoError, Error). */
async function fetchAndDecrypt(
  server: MediaServer | undefined,
  type: MediaType,
  part: MediaMessage,
): Promise<Buffer> {
  if (!server) throw new Error('the simulator runs no media server');
  if (!part.mediaKey) throw new Error('the message has no mediaKey');
  const path = part.directPath ?? (part.url ? new URL(part.url).pathname + new URL(part.url).search : '');
  if (!path) throw new Error('the message has neither directPath nor url');
  const file = await server.download(path);
  return decryptMedia(file, type, {
    mediaKey: part.mediaKey,
    fileSha256: part.fileSha256 ?? null,
    fileEncSha256: part.fileEncSha256 ?? null,
    fileLength: part.fileLength === null || part.fileLength === undefined ? null : Number(part.fileLength),
  });
}

/**
 * Downloads, verifies and decrypts the media of `message` and adds `media` (and `sticker`) to `entry`; the
 * plaintext is published on the context's events as `media` (`{ entry, plaintext }`) for tests that inspect
 * the bytes, and can be had again with {@link decryptedMedia}. A message without media leaves the entry as it
 * is; a failure (no media server, no direct path, a refused download, a failed check) is recorded as
 * `media.error` and logged, never thrown.
 */
export async function completeMedia(
  entry: InboxEntry,
  message: proto.IMessage,
  ctx: Pick<SimContext, 'media' | 'log' | 'events'>,
): Promise<void> {
  const found = mediaPart(message);
  if (!found) return;
  const { type, part } = found;
  try {
    const plaintext = await fetchAndDecrypt(ctx.media, type, part);
    entry.media = { sha256: sha256(plaintext).toString('hex'), length: plaintext.length };
    if (type === 'sticker') {
      const pack = await stickerPack(plaintext);
      if (pack) entry.sticker = pack;
    }
    received.set(entry, found);
    ctx.events.emit('media', { entry, plaintext });
  } catch (error) {
    entry.media = { error: (error as Error).message };
    ctx.log.warn({ err: error, id: entry.id, type }, 'media of a received message not decrypted');
  }
}

/**
 * The decrypted bytes of an inbox entry's media, downloaded and verified again; undefined when the entry has
 * no media that decrypted (`media.error`, or not a media message).
 */
export async function decryptedMedia(
  entry: InboxEntry,
  server: MediaServer | undefined,
): Promise<Buffer | undefined> {
  const found = received.get(entry);
  return found ? fetchAndDecrypt(server, found.type, found.part) : undefined;
}
