import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DomainError, errors } from '../domain/errors.ts';
import { ConversionSlots } from './conversion-slots.ts';
import type { DetectedFormat } from './detect.ts';
import { type StickerMetadata, stickerExif, withExif } from './exif.ts';
import type { Ffmpeg } from './ffmpeg.ts';
import { loadSharp } from './image.ts';
import {
  STICKER_ANIMATED_MAX,
  STICKER_CONVERSION_SECONDS,
  STICKER_CONVERSIONS,
  STICKER_CONVERSIONS_WAITING,
  STICKER_MAX_FRAMES,
  STICKER_MAX_INPUT_PIXELS,
  STICKER_SIZE,
  STICKER_STATIC_MAX,
} from './kinds.ts';

/** A sticker ready to send: 512×512 WEBP bytes, whether it is animated. */
export interface Sticker {
  data: Buffer;
  animated: boolean;
}

/** Encoder settings tried in order until the sticker fits its limit (quality 0–100, frames per second). */
const STATIC_QUALITIES = [80, 60, 40, 20] as const;
const ANIMATED_QUALITIES = [70, 50, 30] as const;
const VIDEO_STEPS = [
  { fps: 15, quality: 50, seconds: 6 },
  { fps: 10, quality: 30, seconds: 6 },
  { fps: 8, quality: 15, seconds: 3 },
] as const;

const TRANSPARENT = { r: 0, g: 0, b: 0, alpha: 0 };

function overLimit(animated: boolean): DomainError {
  return animated
    ? new DomainError('too_large', 'sticker must be at most 500 KB after conversion to animated WEBP')
    : new DomainError('too_large', 'sticker must be at most 100 KB after conversion to WEBP');
}

/**
 * The sticker conversions of this process ({@link STICKER_CONVERSIONS} at once, {@link STICKER_CONVERSIONS_WAITING}
 * waiting; docs/decisions/0017-messages-and-media.md). Exported for tests, which read how many run and wait.
 */
export const stickerConversions = new ConversionSlots(
  STICKER_CONVERSIONS,
  STICKER_CONVERSIONS_WAITING,
  'sticker',
);

/** What the header of an image sticker input says: its frames and the pixels it decodes to (all frames). */
interface StickerSize {
  frames: number;
  pixels: number;
}

/**
 * The frames and pixels of an image, read from its header only (nothing is decoded; a GIF's frames are counted);
 * sharp's own pixel limit is lifted here so that the sticker rules below answer, naming theirs.
 * @throws DomainError invalid `sticker could not be read as an image`.
 */
async function sizeOf(data: Buffer): Promise<StickerSize> {
  const sharp = await loadSharp();
  try {
    const meta = await sharp(data, { animated: true, limitInputPixels: false }).metadata();
    const frames = meta.pages ?? 1;
    // With `animated`, `height` is that of every frame stacked; `pageHeight` one frame's.
    const pixels = (meta.width ?? 0) * (meta.pageHeight ?? meta.height ?? 0) * frames;
    return { frames, pixels };
  } catch (cause) {
    throw new DomainError('invalid', 'sticker could not be read as an image', { cause });
  }
}

const PIXELS_LABEL = STICKER_MAX_INPUT_PIXELS.toLocaleString('en-US');

/**
 * Checks an image sticker input against the conversion budget (docs/decisions/0017-messages-and-media.md) before
 * anything is decoded: at most {@link STICKER_MAX_FRAMES} frames and {@link STICKER_MAX_INPUT_PIXELS} pixels across
 * them. Answers whether it is animated (more than one frame).
 * @throws DomainError too_large `sticker must have at most 100 frames (it has <n>)`, `sticker must be at most
 *   32,000,000 pixels, width × height × frames (it has <n>)`; invalid when it cannot be read.
 */
async function checkImageBudget(data: Buffer): Promise<boolean> {
  const { frames, pixels } = await sizeOf(data);
  if (frames > STICKER_MAX_FRAMES) {
    throw new DomainError(
      'too_large',
      `sticker must have at most ${STICKER_MAX_FRAMES} frames (it has ${frames})`,
    );
  }
  if (pixels > STICKER_MAX_INPUT_PIXELS) throw overPixels(pixels);
  return frames > 1;
}

/** The 413 of an image over {@link STICKER_MAX_INPUT_PIXELS}, with its count when known. */
function overPixels(pixels?: number, cause?: unknown): DomainError {
  const count = pixels === undefined ? '' : ` (it has ${pixels.toLocaleString('en-US')})`;
  return new DomainError(
    'too_large',
    `sticker must be at most ${PIXELS_LABEL} pixels, width × height × frames${count}`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Whether a received sticker's WEBP is animated (more than one frame), so a forward keeps its flag; false when
 * the bytes cannot be read as an image (the file is sent as it is either way).
 */
export function isAnimatedSticker(data: Buffer): Promise<boolean> {
  return sizeOf(data).then(
    ({ frames }) => frames > 1,
    () => false,
  );
}

function tooSlow(cause?: unknown): DomainError {
  return new DomainError(
    'too_large',
    `sticker could not be converted within ${STICKER_CONVERSION_SECONDS} s (use fewer frames or smaller images)`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Converts an image to a 512×512 WEBP, trying lower qualities until it fits its limit, every try within what is
 * left of {@link STICKER_CONVERSION_SECONDS} (sharp's `timeout`, which stops libvips) and
 * {@link STICKER_MAX_INPUT_PIXELS} (sharp's `limitInputPixels`, should the header have understated the size).
 */
async function fromImage(data: Buffer, animated: boolean): Promise<Buffer> {
  const limit = animated ? STICKER_ANIMATED_MAX : STICKER_STATIC_MAX;
  const qualities = animated ? ANIMATED_QUALITIES : STATIC_QUALITIES;
  const sharp = await loadSharp();
  const deadline = Date.now() + STICKER_CONVERSION_SECONDS * 1000;
  for (const quality of qualities) {
    const left = deadline - Date.now();
    if (left <= 0) throw tooSlow();
    let out: Buffer;
    try {
      out = await sharp(data, { animated, limitInputPixels: STICKER_MAX_INPUT_PIXELS })
        .timeout({ seconds: Math.ceil(left / 1000) })
        .resize(STICKER_SIZE, STICKER_SIZE, { fit: 'contain', background: TRANSPARENT })
        .webp({ quality, effort: 4, ...(animated ? { loop: 0 } : {}) })
        .toBuffer();
    } catch (cause) {
      const message = cause instanceof Error ? cause.message : '';
      if (message.startsWith('timeout')) throw tooSlow(cause);
      if (message.includes('pixel limit')) throw overPixels(undefined, cause);
      throw new DomainError('invalid', 'sticker could not be converted to WEBP', { cause });
    }
    if (out.length <= limit) return out;
  }
  throw overLimit(animated);
}

async function fromVideo(data: Buffer, ffmpeg: Ffmpeg): Promise<Buffer> {
  await ffmpeg.require();
  const dir = await mkdtemp(join(tmpdir(), 'parley-sticker-'));
  try {
    const input = join(dir, 'in.mp4');
    const output = join(dir, 'out.webp');
    await writeFile(input, data);
    for (const step of VIDEO_STEPS) {
      const filter =
        `fps=${step.fps},scale=${STICKER_SIZE}:${STICKER_SIZE}:force_original_aspect_ratio=decrease,` +
        `pad=${STICKER_SIZE}:${STICKER_SIZE}:(ow-iw)/2:(oh-ih)/2:color=0x00000000,format=yuva420p`;
      await ffmpeg.run(
        [
          '-y',
          '-i',
          input,
          '-t',
          String(step.seconds),
          '-an',
          '-vf',
          filter,
          '-c:v',
          'libwebp_anim',
          '-lossless',
          '0',
          '-q:v',
          String(step.quality),
          '-loop',
          '0',
          '-f',
          'webp',
          output,
        ],
        'sticker',
      );
      const out = await readFile(output);
      if (out.length <= STICKER_ANIMATED_MAX) return out;
    }
    throw overLimit(true);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Makes a sticker (docs/decisions/0017-messages-and-media.md): static images (WEBP, PNG, JPEG, GIF) become a 512×512
 * WEBP of at most 100 KB with sharp; animated WEBP/GIF stay animated (at most 500 KB); MP4 becomes an animated
 * 512×512 WEBP of at most 500 KB with ffmpeg (first 6 s, lower frame rate and quality tried until it fits). Pack
 * metadata, when any is given, is written into the WEBP's EXIF chunk the way the platform's stickers carry it.
 * An image is first checked against the conversion budget from its header alone (at most {@link STICKER_MAX_FRAMES}
 * frames and {@link STICKER_MAX_INPUT_PIXELS} pixels); a conversion then waits for one of the process's
 * {@link stickerConversions} slots and may take {@link STICKER_CONVERSION_SECONDS} (an image; an MP4's ffmpeg runs
 * have their own limit).
 * @throws DomainError too_large when no setting makes it fit, over the frame or pixel budget, or past the time
 *   limit; invalid when the input cannot be decoded; not_ready (503) when an MP4 arrives and ffmpeg is not
 *   installed, or when {@link STICKER_CONVERSIONS_WAITING} conversions already wait.
 */
export async function makeSticker(
  data: Buffer,
  format: DetectedFormat,
  meta: StickerMetadata,
  ffmpeg: Ffmpeg,
): Promise<Sticker> {
  let webp: Buffer;
  let animated: boolean;
  if (format.ext === 'mp4') {
    webp = await stickerConversions.run(() => fromVideo(data, ffmpeg));
    animated = true;
  } else if (['webp', 'png', 'jpg', 'gif'].includes(format.ext)) {
    const moving = await checkImageBudget(data);
    webp = await stickerConversions.run(() => fromImage(data, moving));
    animated = moving;
  } else {
    throw errors.badRequest('sticker must be WEBP, PNG, JPEG, GIF or MP4');
  }
  const hasMeta =
    meta.packName !== undefined ||
    meta.packId !== undefined ||
    meta.packPublisher !== undefined ||
    (meta.emojis !== undefined && meta.emojis.length > 0);
  if (hasMeta) {
    webp = await withExif(webp, stickerExif(meta));
    if (webp.length > (animated ? STICKER_ANIMATED_MAX : STICKER_STATIC_MAX)) throw overLimit(animated);
  }
  return { data: webp, animated };
}
