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
 * The `Content-Disposition` of a served file: documents are attachments under the sender's file name; other
 * kinds are shown inline, named after the message id with the extension of their bytes.
 */
export function dispositionOf(file: MediaFile, messageId: string): string {
  if (file.kind === 'document') return contentDisposition('attachment', file.fileName ?? 'file');
  return contentDisposition('inline', file.ext === '' ? messageId : `${messageId}.${file.ext}`);
}

/**
 * Sends a received media file as the answer: its type, length and disposition (`dispositionOf`), `nosniff`, and a
 * private one-hour cache (the bytes of a message never change).
 */
export function sendMediaFile(reply: FastifyReply, file: MediaFile, messageId: string): FastifyReply {
  reply
    .header('content-type', file.mimetype)
    .header('content-length', String(file.size))
    .header('content-disposition', dispositionOf(file, messageId))
    .header('x-content-type-options', 'nosniff')
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
              'The decrypted file. `Content-Type` is decided from the bytes (`application/octet-stream` when they do not tell); documents come as an attachment under their file name.',
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
