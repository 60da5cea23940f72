import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DomainError, errors } from '../domain/errors.ts';
import type { DetectedFormat } from './detect.ts';
import { type StickerMetadata, stickerExif, withExif } from './exif.ts';
import type { Ffmpeg } from './ffmpeg.ts';
import { STICKER_ANIMATED_MAX, STICKER_SIZE, STICKER_STATIC_MAX } from './kinds.ts';

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
 * sharp, imported at the first sticker made: its native binding and module graph stay out of every start
 * (docs/decisions/0068-engines-loaded-on-first-use.md).
 */
async function loadSharp(): Promise<typeof import('sharp').default> {
  return (await import('sharp')).default;
}

async function isAnimatedImage(data: Buffer): Promise<boolean> {
  const sharp = await loadSharp();
  try {
    const meta = await sharp(data, { animated: true }).metadata();
    return (meta.pages ?? 1) > 1;
  } catch (cause) {
    throw new DomainError('invalid', 'sticker could not be read as an image', { cause });
  }
}

/**
 * Whether a received sticker's WEBP is animated (more than one frame), so a forward keeps its flag; false when
 * the bytes cannot be read as an image (the file is sent as it is either way).
 */
export function isAnimatedSticker(data: Buffer): Promise<boolean> {
  return isAnimatedImage(data).catch(() => false);
}

async function fromImage(data: Buffer, animated: boolean): Promise<Buffer> {
  const limit = animated ? STICKER_ANIMATED_MAX : STICKER_STATIC_MAX;
  const qualities = animated ? ANIMATED_QUALITIES : STATIC_QUALITIES;
  const sharp = await loadSharp();
  for (const quality of qualities) {
    let out: Buffer;
    try {
      out = await sharp(data, { animated })
        .resize(STICKER_SIZE, STICKER_SIZE, { fit: 'contain', background: TRANSPARENT })
        .webp({ quality, effort: 4, ...(animated ? { loop: 0 } : {}) })
        .toBuffer();
    } catch (cause) {
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
 * @throws DomainError too_large when no setting makes it fit; invalid when the input cannot be
 *   decoded; not_ready (503) when an MP4 arrives and ffmpeg is not installed.
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
    webp = await fromVideo(data, ffmpeg);
    animated = true;
  } else if (['webp', 'png', 'jpg', 'gif'].includes(format.ext)) {
    animated = await isAnimatedImage(data);
    webp = await fromImage(data, animated);
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
