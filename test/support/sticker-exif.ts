import webpmux from 'node-webpmux';

/** Bytes before the JSON in a sticker's EXIF chunk (src/media/exif.ts writes a 22-byte TIFF header). */
const HEADER_BYTES = 22;

/**
 * The sticker JSON in a WEBP's EXIF chunk, or undefined when there is none: the reverse of `stickerExif`,
 * read independently of it (length at offset 14, JSON at offset 22).
 */
export async function readStickerExif(webp: Buffer): Promise<Record<string, unknown> | undefined> {
  const image = new webpmux.Image();
  await image.load(webp);
  const exif = image.exif;
  if (!exif || exif.length < HEADER_BYTES) return undefined;
  const length = exif.readUInt32LE(14);
  const parsed: unknown = JSON.parse(exif.subarray(HEADER_BYTES, HEADER_BYTES + length).toString('utf8'));
  return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : undefined;
}
