import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Ffmpeg } from '../../../media/ffmpeg.ts';
import { bodyLimitFor } from '../../../media/kinds.ts';
import { type MediaTools, prepareDocument, prepareMedia, prepareSticker } from '../../../media/prepare.ts';
import {
  SendAudioBody,
  SendDocumentBody,
  SendImageBody,
  SendStickerBody,
  SendVideoBody,
  sendResponses,
} from './messages-schemas.ts';
import { checkMentions, sendMessage } from './messages-send.ts';

const tags = ['messages'];

/**
 * Media sends under `/v1/messages/send/*` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md): image,
 * document, audio (voice note), video and sticker. Each route's body cap is its largest media as line-wrapped base64
 * plus 1 MB (`bodyLimitFor`, docs/decisions/0020-security-promises.md); the media is fetched or decoded, checked from
 * its bytes and (stickers) converted only after the sender and recipient checks pass.
 */
export async function messageMediaRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const shared: MediaTools = { guard: services.guard, ffmpeg: new Ffmpeg(services.config.ffmpegPath) };
  /** The media tools of one request: fetch failures are logged with its request id. */
  const toolsOf = (request: FastifyRequest): MediaTools => ({ ...shared, log: request.log });
  const config = { scope: 'chat:messages', instance: 'body' } as const;
  /** A send's job follows from the forward id: a forward that lost its connection is sent again. */
  const sendConfig = { ...config, repeatable: true } as const;
  const mediaErrors = [409, 413, 422, 502, 503];

  app.post(
    '/send/image',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('image'),
      schema: {
        tags,
        operationId: 'sendImage',
        summary:
          'Send an image (JPEG, PNG, GIF or WEBP, at most 16 MB and 32,000,000 pixels) by https URL or data URI',
        body: SendImageBody,
        response: sendResponses('Message sent: its id and timestamp', ...mediaErrors),
      },
    },
    async (request, reply) => {
      const { image, caption } = request.body;
      checkMentions(request.body.mentions, request.body.caption, 'caption');
      return sendMessage(services, request, reply, request.body, async () => ({
        kind: 'image',
        media: await prepareMedia(toolsOf(request), 'image', image),
        ...(caption === undefined ? {} : { caption }),
      }));
    },
  );

  app.post(
    '/send/document',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('document'),
      schema: {
        tags,
        operationId: 'sendDocument',
        summary: 'Send a document (any format, at most 100 MB) by https URL or data URI',
        body: SendDocumentBody,
        response: sendResponses('Message sent: its id and timestamp', ...mediaErrors),
      },
    },
    async (request, reply) => {
      const { document, fileName, caption } = request.body;
      checkMentions(request.body.mentions, request.body.caption, 'caption');
      return sendMessage(services, request, reply, request.body, async () => {
        const prepared = await prepareDocument(toolsOf(request), document, fileName);
        return {
          kind: 'document',
          media: prepared.media,
          fileName: prepared.fileName,
          ...(caption === undefined ? {} : { caption }),
        };
      });
    },
  );

  app.post(
    '/send/audio',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('audio'),
      schema: {
        tags,
        operationId: 'sendAudio',
        summary: 'Send a voice message (OGG/Opus, MP3, M4A or WAV, at most 16 MB)',
        body: SendAudioBody,
        response: sendResponses('Message sent: its id and timestamp', ...mediaErrors),
      },
    },
    async (request, reply) => {
      const { audio } = request.body;
      return sendMessage(services, request, reply, request.body, async () => ({
        kind: 'audio',
        media: await prepareMedia(toolsOf(request), 'audio', audio),
      }));
    },
  );

  app.post(
    '/send/video',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('video'),
      schema: {
        tags,
        operationId: 'sendVideo',
        summary: 'Send a video (MP4 or 3GP, at most 16 MB)',
        body: SendVideoBody,
        response: sendResponses('Message sent: its id and timestamp', ...mediaErrors),
      },
    },
    async (request, reply) => {
      const { video, caption } = request.body;
      checkMentions(request.body.mentions, request.body.caption, 'caption');
      return sendMessage(services, request, reply, request.body, async () => ({
        kind: 'video',
        media: await prepareMedia(toolsOf(request), 'video', video),
        ...(caption === undefined ? {} : { caption }),
      }));
    },
  );

  app.post(
    '/send/sticker',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('sticker'),
      schema: {
        tags,
        operationId: 'sendSticker',
        summary: 'Send a sticker: static image or MP4, converted to a 512×512 WEBP with pack metadata',
        body: SendStickerBody,
        response: sendResponses('Message sent: its id and timestamp', ...mediaErrors),
      },
    },
    async (request, reply) => {
      const { sticker, packName, packId, packPublisher, emojis } = request.body;
      return sendMessage(services, request, reply, request.body, async () => {
        const prepared = await prepareSticker(toolsOf(request), sticker, {
          ...(packName === undefined ? {} : { packName }),
          ...(packId === undefined ? {} : { packId }),
          ...(packPublisher === undefined ? {} : { packPublisher }),
          ...(emojis === undefined ? {} : { emojis }),
        });
        return { kind: 'sticker', media: prepared.media, animated: prepared.animated };
      });
    },
  );
}
