import { createHash } from 'node:crypto';
import webpmux from 'node-webpmux';

/**
 * Sticker pack metadata (docs/decisions/0017-messages-and-media.md: `packName`, `packId`, `packPublisher`, `emojis`).
 */
export interface StickerMetadata {
  packName?: string;
  packId?: string;
  packPublisher?: string;
  emojis?: readonly string[];
}

/**
 * Fixed TIFF header the platform's stickers carry before their JSON: little-endian (`II*\0`), first IFD at 8,
 * one entry, tag 0x5741, type 7 (UNDEFINED), count patched in at offset 14, value at offset 22.
 */
const TIFF_HEADER = [
  0x49, 0x49, 0x2a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x41, 0x57, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x16, 0x00, 0x00, 0x00,
];

/**
 * The EXIF chunk of a sticker as the platform's apps write it: the TIFF header above followed by the JSON
 * `{ "sticker-pack-id", "sticker-pack-name", "sticker-pack-publisher", "emojis" }`. Without a `packId` the
 * id is derived from name and publisher, so a pack keeps one id across sends.
 */
export function stickerExif(meta: StickerMetadata): Buffer {
  const name = meta.packName ?? '';
  const publisher = meta.packPublisher ?? '';
  const id =
    meta.packId ??
    `parley.${createHash('sha256').update(`${name}\0${publisher}`).digest('hex').slice(0, 16)}`;
  const json = Buffer.from(
    JSON.stringify({
      'sticker-pack-id': id,
      'sticker-pack-name': name,
      'sticker-pack-publisher': publisher,
      emojis: [...(meta.emojis ?? [])],
    }),
    'utf8',
  );
  const header = Buffer.from(TIFF_HEADER);
  header.writeUInt32LE(json.length, 14);
  return Buffer.concat([header, json]);
}

/** `webp` with its EXIF chunk replaced by `exif` (static or animated WEBP). */
export async function withExif(webp: Buffer, exif: Buffer): Promise<Buffer> {
  const image = new webpmux.Image();
  await image.load(webp);
  image.exif = exif;
  return image.save(null);
}
