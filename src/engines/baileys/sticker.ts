import { createRequire } from 'node:module';

/** Sticker pack metadata written into a sticker's WEBP (DESIGN D8: `packName`, `packId`, `packPublisher`, `emojis`). */
export interface StickerPack {
  packId?: string;
  packName?: string;
  packPublisher?: string;
  emojis?: readonly string[];
}

interface WebpImage {
  load(data: Buffer): Promise<void>;
  exif: Buffer | undefined;
  save(path: null): Promise<Buffer>;
}

interface WebpMux {
  Image: new () => WebpImage;
}

const require = createRequire(import.meta.url);

/**
 * The EXIF block WhatsApp reads sticker pack metadata from: a little-endian TIFF header with one IFD entry, tag
 * 0x5741 ("WA") of type UNDEFINED whose value is the JSON `{ "sticker-pack-id", "sticker-pack-name",
 * "sticker-pack-publisher", "emojis" }` (the layout WhatsApp's own stickers and wa-sticker-formatter use).
 */
export function stickerExif(pack: StickerPack): Buffer {
  const json: Record<string, unknown> = {};
  if (pack.packId) json['sticker-pack-id'] = pack.packId;
  if (pack.packName) json['sticker-pack-name'] = pack.packName;
  if (pack.packPublisher) json['sticker-pack-publisher'] = pack.packPublisher;
  if (pack.emojis && pack.emojis.length > 0) json.emojis = [...pack.emojis];
  const body = Buffer.from(JSON.stringify(json), 'utf8');
  const header = Buffer.from([
    0x49, 0x49, 0x2a, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x41, 0x57, 0x07, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x16, 0x00, 0x00, 0x00,
  ]);
  header.writeUInt32LE(body.length, 14);
  return Buffer.concat([header, body]);
}

/** Reads the pack JSON back out of a block made by {@link stickerExif}; undefined when it is not one. */
export function readStickerExif(exif: Buffer): Record<string, unknown> | undefined {
  if (exif.length < 22 || exif.readUInt16LE(10) !== 0x5741) return undefined;
  const length = exif.readUInt32LE(14);
  const offset = exif.readUInt32LE(18);
  try {
    return JSON.parse(exif.subarray(offset, offset + length).toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/**
 * The WEBP `webp` (static or animated) with `pack` in its EXIF chunk (converted to the extended VP8X format when
 * needed, by node-webpmux; frames are not re-encoded). Returns `webp` unchanged when `pack` carries nothing.
 * @throws when the bytes are not a WEBP node-webpmux can parse.
 */
export async function withStickerMetadata(webp: Buffer, pack: StickerPack): Promise<Buffer> {
  const exif = stickerExif(pack);
  if (exif.length <= 24) return webp;
  const { Image } = require('node-webpmux') as WebpMux;
  const image = new Image();
  await image.load(webp);
  image.exif = exif;
  return image.save(null);
}

/** The pack metadata of a WEBP sticker, when it has any (tests, diagnostics). */
export async function stickerMetadataOf(webp: Buffer): Promise<Record<string, unknown> | undefined> {
  const { Image } = require('node-webpmux') as WebpMux;
  const image = new Image();
  await image.load(webp);
  return image.exif ? readStickerExif(image.exif) : undefined;
}
