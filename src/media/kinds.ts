/**
 * Media kinds, their size limits and accepted formats (docs/decisions/0017-messages-and-media.md table). Formats are
 * decided from the bytes (magic numbers, npm `file-type`), never from a declared type or a file name.
 */

/** A kind of media a send accepts. */
export type MediaKind = 'image' | 'audio' | 'video' | 'document' | 'sticker';

/** One megabyte as the limits count it (2^20 bytes). */
export const MB = 1024 * 1024;
/** One kilobyte as the limits count it (2^10 bytes). */
export const KB = 1024;

/** What a kind accepts: the largest input in bytes, and the formats (`file-type` extensions) it allows. */
export interface MediaRule {
  /** Largest accepted input, bytes (docs/decisions/0017-messages-and-media.md). */
  maxBytes: number;
  /** The limit as people read it, used in 413 messages (`image must be at most 16 MB`). */
  maxLabel: string;
  /** Allowed `file-type` extensions; null = any format (documents). */
  formats: readonly string[] | null;
  /** The allowed formats as people read them, used in 400 messages. */
  formatsLabel: string;
}

/**
 * The docs/decisions/0017-messages-and-media.md table. Sticker inputs are capped at 500 KB (the animated limit);
 * after conversion a static sticker must fit in 100 KB and an animated one in 500 KB ({@link STICKER_STATIC_MAX},
 * {@link STICKER_ANIMATED_MAX}). Static image inputs other than WEBP are accepted and converted.
 */
export const MEDIA_RULES: Record<MediaKind, MediaRule> = {
  image: {
    maxBytes: 16 * MB,
    maxLabel: '16 MB',
    formats: ['jpg', 'png', 'gif', 'webp'],
    formatsLabel: 'JPEG, PNG, GIF or WEBP',
  },
  audio: {
    maxBytes: 16 * MB,
    maxLabel: '16 MB',
    // `opus` is file-type's name for OGG/Opus; its `ogg` is OGG/Vorbis, which is not an accepted format.
    formats: ['opus', 'mp3', 'm4a', 'wav'],
    formatsLabel: 'OGG (Opus), MP3, M4A or WAV',
  },
  video: {
    maxBytes: 16 * MB,
    maxLabel: '16 MB',
    formats: ['mp4', 'm4v', '3gp', '3g2'],
    formatsLabel: 'MP4 or 3GP',
  },
  document: { maxBytes: 100 * MB, maxLabel: '100 MB', formats: null, formatsLabel: 'any format' },
  sticker: {
    maxBytes: 500 * KB,
    maxLabel: '500 KB',
    formats: ['webp', 'png', 'jpg', 'gif', 'mp4'],
    formatsLabel: 'WEBP, PNG, JPEG, GIF or MP4',
  },
};

/**
 * Most pixels an image parley sends may decode to, width × height of its first frame (the only one decoded of an
 * animated GIF or WEBP; docs/decisions/0017-messages-and-media.md). A few bytes can declare far more (a 62-byte GIF
 * declares 16,000 × 16,000, which decodes to 1 GB), and what an image decodes to, not its bytes, is what making its
 * thumbnail costs. Checked from the header of every image sent (image and status sends, forwards, the profile
 * picture) before either engine sees it, and passed to sharp as `limitInputPixels` when the live engine makes the
 * thumbnail. Twice the largest photo a WhatsApp client sends (HD quality: 4096 px on the long side, at most 16 MP)
 * and a 24 MP camera's original (6,000 × 4,000); the same budget as a sticker's input
 * ({@link STICKER_MAX_INPUT_PIXELS}).
 */
export const IMAGE_MAX_PIXELS = 32_000_000;
/** Width of the JPEG thumbnail a sent image carries, pixels (what Baileys' `extractImageThumb` makes: 32). */
export const THUMBNAIL_WIDTH = 32;
/**
 * Time making one image's thumbnail may take, seconds (sharp's `timeout`, which stops libvips;
 * docs/decisions/0017-messages-and-media.md): an image of {@link IMAGE_MAX_PIXELS} takes well under 1 s.
 */
export const THUMBNAIL_SECONDS = 10;

/** Largest static sticker after conversion to WEBP, bytes (docs/decisions/0017-messages-and-media.md: 100 KB). */
export const STICKER_STATIC_MAX = 100 * KB;
/** Largest animated sticker after conversion to WEBP, bytes (docs/decisions/0017-messages-and-media.md: 500 KB). */
export const STICKER_ANIMATED_MAX = 500 * KB;
/** Side of a sticker, pixels (docs/api.md#messages: 512×512 recommended). */
export const STICKER_SIZE = 512;
/**
 * Most frames an animated image (GIF, WEBP) may have to become a sticker (docs/decisions/0017-messages-and-media.md):
 * the frame budget, 100 frames of 512×512 (26,214,400 output pixels), about what the MP4 path keeps (6 s at 15 fps).
 * Every frame is resized and encoded, up to three times, so the cost of a conversion grows with it, not with the
 * input's bytes: a GIF of 1×1 frames takes about 23 bytes a frame.
 */
export const STICKER_MAX_FRAMES = 100;
/**
 * Most pixels an image sticker input may decode to, width × height × frames
 * (docs/decisions/0017-messages-and-media.md): a 5,600 × 5,600 photo, or 100 frames of 512×512 and some more. Passed
 * to sharp as `limitInputPixels`.
 */
export const STICKER_MAX_INPUT_PIXELS = 32_000_000;
/**
 * Time one sticker conversion may take, every quality tried included, seconds
 * (docs/decisions/0017-messages-and-media.md).
 */
export const STICKER_CONVERSION_SECONDS = 30;
/**
 * Sticker conversions a process runs at once (docs/decisions/0017-messages-and-media.md): each holds one of libuv's
 * 4 threads while it runs, so two leave the others to the file system, DNS and crypto.
 */
export const STICKER_CONVERSIONS = 2;
/**
 * Sticker conversions that may wait for a slot; one more is refused with 503
 * (docs/decisions/0017-messages-and-media.md).
 */
export const STICKER_CONVERSIONS_WAITING = 32;

/** Base64 characters per line when base64 is wrapped as MIME wraps it (RFC 2045 §6.8: at most 76). */
const BASE64_LINE = 76;

/**
 * Request body cap, bytes, for a route whose media field holds at most `maxBytes` decoded bytes
 * (docs/decisions/0020-security-promises.md): the bytes as base64 in a data URI, wrapped as MIME wraps it (a CRLF every
 * 76 characters, written `\r\n` in JSON: 4 bytes a line, about 5 %), plus 1 MB for the other fields (captions, JSON
 * escaping). The decoded size is the real limit (src/media/source.ts `decodeDataUri`, 413 naming the field); this cap
 * only stops a body larger than any allowed one from being read.
 */
export function bodyLimitForBytes(maxBytes: number): number {
  const base64 = Math.ceil(maxBytes / 3) * 4;
  return base64 + Math.ceil(base64 / BASE64_LINE) * 4 + MB;
}

/** Request body cap for a route carrying one media field of `kind`, bytes ({@link bodyLimitForBytes}). */
export function bodyLimitFor(kind: MediaKind): number {
  return bodyLimitForBytes(MEDIA_RULES[kind].maxBytes);
}
