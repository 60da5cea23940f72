import type { MediaPayload } from '../domain/messages.ts';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import { defaultFileName, detectFormat, documentMimeType, requireFormat } from './detect.ts';
import type { StickerMetadata } from './exif.ts';
import type { Ffmpeg } from './ffmpeg.ts';
import { MEDIA_RULES } from './kinds.ts';
import { type MediaFetchLog, readMediaSource } from './source.ts';
import { makeSticker } from './sticker.ts';

/** What media preparation needs from the app: the outbound guard (URL fetches) and ffmpeg (animated stickers). */
export interface MediaTools {
  guard: OutboundGuard;
  ffmpeg: Ffmpeg;
  /** Where refused or failed fetches are logged in detail (the request's logger, so with its request id). */
  log?: MediaFetchLog;
}

/**
 * Reads and checks an image, audio or video field (docs/decisions/0017-messages-and-media.md): source per {@link
 * readMediaSource}, size per the kind's limit, format from the bytes; the MIME type sent is the detected one.
 * @throws DomainError invalid (source, format) or too_large naming the field and the rule.
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
