import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { MediaFile } from '../../../app/media.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery } from '../../schemas.ts';

/** Path of `GET /v1/messages/{id}/media`: the message id as the platform gave it. */
const MediaParams = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: 100,
    description: 'id of a received media message (`event.info.id` of its Message webhook)',
    examples: ['3A6D5E0F9C1B2A3D4E5F60718293A4B5'],
  }),
});

const error = Type.Ref('ErrorEnvelope');

/**
 * A file name for a `Content-Disposition` header: the ASCII fallback and the RFC 5987 UTF-8 form. A name that is
 * not well-formed UTF-16 (a lone surrogate, which the platform's protobuf decoding yields for invalid UTF-8 bytes) has
 * U+FFFD in its place, as it would be written out as UTF-8 anyway.
 */
export function contentDisposition(type: 'inline' | 'attachment', name: string): string {
  const cleaned =
    name
      .toWellFormed()
      .replace(/[\r\n"\\/]/g, '_')
      .trim() || 'file';
  const ascii = cleaned.replace(/[^\x20-\x7e]/g, '_');
  const encoded = encodeURIComponent(cleaned).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${type}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/**
 * The MIME types (without parameters) a received file may be shown inline as: raster images, video and audio that a
 * browser plays and that carry no script (docs/decisions/0017-messages-and-media.md). Never SVG, XML, HTML, PDF or
 * anything else a browser runs or renders as a document: the file's bytes are the sender's, and the dashboard serves
 * them from its own origin.
 */
export const INLINE_TYPES: ReadonlySet<string> = new Set([
  'image/jpeg',
  'image/png',
  'image/gif',
  'image/webp',
  'video/mp4',
  'video/x-m4v',
  'video/3gpp',
  'video/3gpp2',
  'audio/ogg',
  'audio/opus',
  'audio/mpeg',
  'audio/mp4',
  'audio/x-m4a',
  'audio/aac',
  'audio/wav',
]);

/**
 * The `Content-Security-Policy` of every served media file (docs/decisions/0017-messages-and-media.md): nothing may
 * load and the file, opened as a page, is sandboxed (no script, an opaque origin) whatever its type.
 */
export const MEDIA_CSP = "default-src 'none'; sandbox";

/** True when a file of MIME type `mimetype` (parameters ignored) may be served inline ({@link INLINE_TYPES}). */
export function servedInline(mimetype: string): boolean {
  return INLINE_TYPES.has(mimetype.split(';', 1)[0]?.trim().toLowerCase() ?? '');
}

/**
 * The `Content-Disposition` of a served file (docs/decisions/0017-messages-and-media.md): images, stickers, videos
 * and audio whose bytes are one of {@link INLINE_TYPES} are shown inline, named after the message id with the
 * extension of their bytes; any other such file is an attachment under that name, and documents are attachments
 * under the sender's file name.
 */
export function dispositionOf(file: MediaFile, messageId: string): string {
  if (file.kind === 'document') return contentDisposition('attachment', file.fileName ?? 'file');
  const name = file.ext === '' ? messageId : `${messageId}.${file.ext}`;
  return contentDisposition(servedInline(file.mimetype) ? 'inline' : 'attachment', name);
}

/**
 * Sends a received media file as the answer (the API's and the dashboard's): its type, length and disposition
 * (`dispositionOf`), `nosniff`, the sandboxing {@link MEDIA_CSP}, and a private one-hour cache (the bytes of a
 * message never change).
 */
export function sendMediaFile(reply: FastifyReply, file: MediaFile, messageId: string): FastifyReply {
  reply
    .header('content-type', file.mimetype)
    .header('content-length', String(file.size))
    .header('content-disposition', dispositionOf(file, messageId))
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', MEDIA_CSP)
    .header('cache-control', 'private, max-age=3600');
  return reply.send(file.open());
}

/**
 * `GET /v1/messages/{id}/media`: the decrypted bytes of a received media message (image, video, voice note or
 * audio, document, sticker), fetched from the platform on first request and then kept in the local media store
 * for `MEDIA_RETENTION_DAYS`. When the platform's link expired, the sender's phone is asked to upload the file
 * again (docs/decisions/0046-media-re-upload.md): 410 when it cannot, 409 when the instance is not connected to
 * ask. Scope `chat:messages`; the instance comes from `from` or `x-instance-id`.
 */
export async function messageDownloadRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { media } = app.services.app;

  app.get(
    '/:id/media',
    {
      config: { scope: 'chat:messages', instance: 'query' },
      schema: {
        tags: ['messages'],
        operationId: 'downloadMessageMedia',
        summary: 'Download the file of a received media message (image, video, audio, document, sticker)',
        querystring: InstanceQuery,
        params: MediaParams,
        response: {
          200: {
            description:
              "The decrypted file. `Content-Type` is decided from the bytes (`application/octet-stream` when they do not tell). Images, stickers, videos and audio come inline only when their bytes are a JPEG, PNG, GIF, WEBP, MP4, 3GP, OGG, MP3, M4A, AAC or WAV, otherwise as an attachment; documents come as an attachment under their file name. Every answer carries `Content-Security-Policy: default-src 'none'; sandbox` and `X-Content-Type-Options: nosniff`.",
            content: { '*/*': { schema: Type.String({ format: 'binary' }) } },
          },
          400: error,
          401: error,
          403: error,
          404: error,
          409: error,
          410: error,
          413: error,
          429: error,
          500: error,
          502: error,
          503: error,
        },
      },
    },
    async (request, reply) => {
      return sendMediaFile(
        reply,
        await media.open(instanceOf(request), request.params.id),
        request.params.id,
      );
    },
  );
}
