import { DomainError } from '../domain/errors.ts';
import { IMAGE_MAX_PIXELS, THUMBNAIL_SECONDS, THUMBNAIL_WIDTH } from './kinds.ts';

/**
 * sharp, imported at the first image checked or sticker made: its native binding and module graph stay out of every
 * start (docs/decisions/0068-engines-loaded-on-first-use.md).
 */
export async function loadSharp(): Promise<typeof import('sharp').default> {
  return (await import('sharp')).default;
}

/** The size an image's header declares, pixels. */
export interface ImageSize {
  /** Width, pixels. */
  width: number;
  /** Height of one frame (the first of an animated GIF or WEBP), pixels. */
  height: number;
}

const PIXELS_LABEL = IMAGE_MAX_PIXELS.toLocaleString('en-US');

/** The 413 of field `field` over {@link IMAGE_MAX_PIXELS}, with its count when known. */
function overPixels(field: string, pixels?: number, cause?: unknown): DomainError {
  const count = pixels === undefined ? '' : ` (it has ${pixels.toLocaleString('en-US')})`;
  return new DomainError(
    'too_large',
    `${field} must be at most ${PIXELS_LABEL} pixels, width × height${count}`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * The width and height `data`'s header declares (sharp's `metadata`, which decodes no pixel; of the first frame of an
 * animated GIF or WEBP), checked against {@link IMAGE_MAX_PIXELS} (docs/decisions/0017-messages-and-media.md) before
 * anything decodes the image: every image parley sends (image and status sends, forwarded images, the profile
 * picture), on both engines alike, since the live one hands it to the platform library, which decodes it for a
 * thumbnail or a profile picture. sharp's own pixel limit is lifted for the read so that this rule answers, naming
 * the field.
 * @throws DomainError too_large `<field> must be at most 32,000,000 pixels, width × height (it has <n>)`; invalid
 *   `<field> could not be read as an image` when sharp cannot read the header.
 */
export async function checkImagePixels(data: Buffer, field: string): Promise<ImageSize> {
  const sharp = await loadSharp();
  let size: ImageSize;
  try {
    const meta = await sharp(data, { limitInputPixels: false }).metadata();
    size = { width: meta.width ?? 0, height: meta.pageHeight ?? meta.height ?? 0 };
  } catch (cause) {
    throw new DomainError('invalid', `${field} could not be read as an image`, { cause });
  }
  const pixels = size.width * size.height;
  if (pixels > IMAGE_MAX_PIXELS) throw overPixels(field, pixels);
  return size;
}

/** A sent image's thumbnail ({@link imageThumbnail}), and the image's size as its message states it. */
export interface ImageThumbnail {
  /** JPEG bytes, {@link THUMBNAIL_WIDTH} pixels wide, quality 50. */
  jpeg: Buffer;
  /** The image's width, pixels (as stored, before any EXIF orientation). */
  width: number;
  /** The image's height (its first frame's), pixels. */
  height: number;
}

/**
 * The thumbnail of an image message (docs/decisions/0017-messages-and-media.md), made by parley rather than by the
 * platform library (Baileys' `extractImageThumb`, which decodes with sharp's default limit of 268,402,689 pixels):
 * the same JPEG, {@link THUMBNAIL_WIDTH} pixels wide at quality 50, and the image's width and height. The header is
 * checked first ({@link checkImagePixels}); the decode is held to {@link IMAGE_MAX_PIXELS} as well (sharp's
 * `limitInputPixels`, should the header have understated the size) and to {@link THUMBNAIL_SECONDS} (sharp's
 * `timeout`).
 * @throws DomainError too_large over {@link IMAGE_MAX_PIXELS} (naming `image`); invalid when the image cannot be
 *   read or decoded, or took longer than {@link THUMBNAIL_SECONDS}.
 */
export async function imageThumbnail(data: Buffer): Promise<ImageThumbnail> {
  const { width, height } = await checkImagePixels(data, 'image');
  const sharp = await loadSharp();
  try {
    const jpeg = await sharp(data, { limitInputPixels: IMAGE_MAX_PIXELS })
      .timeout({ seconds: THUMBNAIL_SECONDS })
      .resize(THUMBNAIL_WIDTH)
      .jpeg({ quality: 50 })
      .toBuffer();
    return { jpeg, width, height };
  } catch (cause) {
    const message = cause instanceof Error ? cause.message : '';
    if (message.includes('pixel limit')) throw overPixels('image', undefined, cause);
    throw new DomainError('invalid', `image thumbnail could not be made (${message})`, { cause });
  }
}
