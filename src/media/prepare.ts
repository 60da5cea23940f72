import { DomainError, errors } from '../domain/errors.ts';
import type { MediaPayload } from '../domain/messages.ts';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import { defaultFileName, detectFormat, documentMimeType, requireFormat } from './detect.ts';
import type { StickerMetadata } from './exif.ts';
import type { Ffmpeg } from './ffmpeg.ts';
import { checkImagePixels } from './image.ts';
import { MEDIA_RULES, type MediaKind, STICKER_STATIC_MAX } from './kinds.ts';
import { type MediaFetchLog, mediaTooLarge, readMediaSource } from './source.ts';
import { isAnimatedSticker, makeSticker } from './sticker.ts';

/** What media preparation needs from the app: the outbound guard (URL fetches) and ffmpeg (animated stickers). */
export interface MediaTools {
  guard: OutboundGuard;
  ffmpeg: Ffmpeg;
  /** Where refused or failed fetches are logged in detail (the request's logger, so with its request id). */
  log?: MediaFetchLog;
}

/**
 * Reads and checks an image, audio or video field (docs/decisions/0017-messages-and-media.md): source per {@link
 * readMediaSource}, size per the kind's limit, format from the bytes; an image's pixels, read from its header, at
 * most 32,000,000 (`IMAGE_MAX_PIXELS`, {@link checkImagePixels}), on both engines alike. The MIME type sent is the
 * detected one.
 * @throws DomainError invalid (source, format, an image whose header cannot be read) or too_large (bytes, an image's
 *   pixels: `image must be at most 32,000,000 pixels, width × height (it has <n>)`) naming the field and the rule.
 */
export async function prepareMedia(
  tools: MediaTools,
  kind: 'image' | 'audio' | 'video',
  raw: string,
  field: string = kind,
): Promise<MediaPayload> {
  const rule = MEDIA_RULES[kind];
  const source = await readMediaSource(tools.guard, raw, field, rule, tools.log);
  const format = await requireFormat(source.data, field, rule);
  if (kind === 'image') await checkImagePixels(source.data, field);
  return { data: source.data, mimetype: format.mime };
}

/**
 * Reads a document field (docs/decisions/0017-messages-and-media.md: any format, at most 100 MB). `fileName` defaults
 * from the URL's last path segment, else `file` plus the detected extension; the MIME type comes from the bytes (see
 * {@link documentMimeType}).
 * @throws DomainError invalid or too_large naming the field and the rule.
 */
export async function prepareDocument(
  tools: MediaTools,
  raw: string,
  fileName: string | undefined,
  field = 'document',
): Promise<{ media: MediaPayload; fileName: string }> {
  const source = await readMediaSource(tools.guard, raw, field, MEDIA_RULES.document, tools.log);
  const found = await detectFormat(source.data);
  const name = fileName ?? defaultFileName(source.url, found);
  return {
    media: { data: source.data, mimetype: documentMimeType(found, source.data, name) },
    fileName: name,
  };
}

/**
 * Reads and converts a sticker field (docs/decisions/0017-messages-and-media.md): input at most 500 KB,
 * WEBP/PNG/JPEG/GIF/MP4 judged from the bytes, converted to a 512×512 WEBP (static ≤ 100 KB, animated ≤ 500 KB)
 * carrying the pack metadata.
 * @throws DomainError invalid, too_large, or not_ready (503) when an MP4 needs the missing ffmpeg.
 */
export async function prepareSticker(
  tools: MediaTools,
  raw: string,
  meta: StickerMetadata,
  field = 'sticker',
): Promise<{ media: MediaPayload; animated: boolean }> {
  const rule = MEDIA_RULES.sticker;
  const source = await readMediaSource(tools.guard, raw, field, rule, tools.log);
  const format = await requireFormat(source.data, field, rule);
  const sticker = await makeSticker(source.data, format, meta, tools.ffmpeg);
  return { media: { data: sticker.data, mimetype: 'image/webp' }, animated: sticker.animated };
}

/** A stored file checked for sending again ({@link checkStoredMedia}): what goes to the engine, and a sticker's flag. */
export interface CheckedMedia {
  /** The bytes as stored, with the MIME type detected from them. */
  media: MediaPayload;
  /** A sticker with more than one frame; false for every other kind. */
  animated: boolean;
}

/**
 * Checks the file of a stored media message of `kind` that is sent again (a forward,
 * docs/decisions/0041-forward-calls-channels.md) by the rules a send of that kind meets
 * (docs/decisions/0017-messages-and-media.md), rather than trusting it because the platform delivered it: the kind's
 * largest input and formats, judged from the bytes; a sticker must be a WEBP (what every sent sticker is made into)
 * of at most 500 KB animated or 100 KB static, and is not converted again (its pack metadata stays); an image must
 * be of at most 32,000,000 pixels (`IMAGE_MAX_PIXELS`, {@link checkImagePixels}). The MIME type sent is the one
 * detected from the bytes, never the one its sender declared; a document's comes from its bytes and `fileName`
 * ({@link documentMimeType}). Errors name the kind as a send names its media field (`sticker must be at most 500 KB`,
 * `image must be JPEG, PNG, GIF or WEBP`, `image must be at most 32,000,000 pixels, width × height (it has <n>)`).
 * @throws DomainError too_large or invalid naming the kind and the rule.
 */
export async function checkStoredMedia(
  kind: MediaKind,
  data: Buffer,
  fileName = 'file',
): Promise<CheckedMedia> {
  const rule = MEDIA_RULES[kind];
  if (data.length > rule.maxBytes) throw mediaTooLarge(kind, rule);
  if (kind === 'document') {
    return {
      media: { data, mimetype: documentMimeType(await detectFormat(data), data, fileName) },
      animated: false,
    };
  }
  if (kind === 'sticker') {
    if ((await detectFormat(data))?.ext !== 'webp') throw errors.badRequest('sticker must be WEBP');
    const animated = await isAnimatedSticker(data);
    if (!animated && data.length > STICKER_STATIC_MAX) {
      throw new DomainError('too_large', 'sticker must be at most 100 KB as a static WEBP');
    }
    return { media: { data, mimetype: 'image/webp' }, animated };
  }
  const format = await requireFormat(data, kind, rule);
  if (kind === 'image') await checkImagePixels(data, kind);
  return { media: { data, mimetype: format.mime }, animated: false };
}
