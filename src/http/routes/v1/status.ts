import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HttpServices } from '../../../app/http-services.ts';
import { backgroundArgbOf, checkStatusFont, MAX_STATUS_AUDIENCE } from '../../../app/status.ts';
import { type OutgoingContent, STATUS_BROADCAST } from '../../../domain/messages.ts';
import { Ffmpeg } from '../../../media/ffmpeg.ts';
import { bodyLimitFor } from '../../../media/kinds.ts';
import { type MediaTools, prepareMedia } from '../../../media/prepare.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceSelector, Phone, responses } from '../../schemas.ts';
import { MAX_TEXT, QueuedResult, SendAt, SendResult } from './messages-schemas.ts';
import { sendMessage } from './messages-send.ts';

const tags = ['status'];

const From = Type.Optional({
  ...InstanceSelector,
  description: 'posting instance: its UUID or linked phone number; omitted: the most recently connected',
  examples: ['5511999990001'],
});

/**
 * `contacts` of a status: who sees it (docs/decisions/0044-status-stories.md). Omitted: the users the instance
 * exchanged messages with most recently (at most {@link MAX_STATUS_AUDIENCE}).
 */
const Contacts = Type.Optional(
  Type.Array(Phone('a contact who sees the status: phone number, digits only', '5511988887777'), {
    minItems: 1,
    maxItems: MAX_STATUS_AUDIENCE,
    description: `phone numbers that see the status (unique, at most ${MAX_STATUS_AUDIENCE}); omitted: the users the instance exchanged messages with, most recent first`,
    examples: [['5511988887777', '5511977776666']],
  }),
);

const Caption = Type.Optional(
  Type.String({
    maxLength: MAX_TEXT,
    description: 'caption shown over the media',
    examples: ['New in store'],
  }),
);

const Media = (example: string, description: string) =>
  Type.String({
    minLength: 1,
    description: `${description}: an https:// URL or a data: URI (base64); the format is read from the bytes`,
    examples: [example],
    'x-message': '{field} must be an https:// URL or a data: URI',
  });

/** Body of `POST /v1/status/text` (docs/api.md#status). */
export const StatusTextBody = Type.Object(
  {
    body: Type.String({
      minLength: 1,
      maxLength: MAX_TEXT,
      description: 'the status text',
      examples: ['Open until 8 pm today'],
    }),
    backgroundColor: Type.Optional(
      Type.String({
        pattern: '^#([0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})$',
        'x-message': '{field} must be a colour #RRGGBB or #AARRGGBB',
        description: 'background colour, #RRGGBB (opaque) or #AARRGGBB',
        examples: ['#1E88E5'],
      }),
    ),
    font: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 10,
        'x-message': '{field} must be one of 0, 1, 2, 6, 7, 8, 9, 10',
        description:
          "the text's font, WhatsApp's numbers: 0 system, 1 system text, 2 script, 6 system bold, 7 Morning Breeze, 8 Calistoga, 9 Exo 2 extra bold, 10 Courier Prime bold",
        examples: [1],
      }),
    ),
    contacts: Contacts,
    from: From,
    sendAt: SendAt,
  },
  { title: 'StatusTextBody' },
);
export type StatusTextBody = Static<typeof StatusTextBody>;

/** Body of `POST /v1/status/image` (docs/api.md#status; the image rules of `POST /v1/messages/send/image`). */
export const StatusImageBody = Type.Object(
  {
    image: Media(
      'https://example.com/photo.jpg',
      'JPEG, PNG, GIF or WEBP, at most 16 MB and 32,000,000 pixels (width × height)',
    ),
    caption: Caption,
    contacts: Contacts,
    from: From,
    sendAt: SendAt,
  },
  { title: 'StatusImageBody' },
);
export type StatusImageBody = Static<typeof StatusImageBody>;

/** Body of `POST /v1/status/video` (docs/api.md#status; the video rules of `POST /v1/messages/send/video`). */
export const StatusVideoBody = Type.Object(
  {
    video: Media('https://example.com/clip.mp4', 'MP4 or 3GP, at most 16 MB'),
    caption: Caption,
    contacts: Contacts,
    from: From,
    sendAt: SendAt,
  },
  { title: 'StatusVideoBody' },
);
export type StatusVideoBody = Static<typeof StatusVideoBody>;

const Recipients = Type.Integer({
  minimum: 1,
  description: 'how many phone numbers the status was addressed to',
  examples: [2],
});

/** `data` of a posted status: the send's answer plus the size of its audience. */
export const StatusResult = Type.Object(
  { ...SendResult.properties, recipients: Recipients },
  { title: 'StatusResult' },
);
export type StatusResult = Static<typeof StatusResult>;

/** `data` of a status queued with `Prefer: respond-async` or `sendAt`. */
export const QueuedStatusResult = Type.Object(
  { ...QueuedResult.properties, recipients: Recipients },
  { title: 'QueuedStatusResult' },
);
export type QueuedStatusResult = Static<typeof QueuedStatusResult>;

/** The answers of a status post: 200 after the relay, 202 when queued, and the errors. */
function statusResponses(...statuses: number[]): Record<number, TSchema> {
  return {
    ...responses(
      'Status posted: its message id, timestamp and audience size',
      StatusResult,
      409,
      ...statuses,
    ),
    202: Type.Object(
      { success: Type.Literal(true), code: Type.Literal(202), data: QueuedStatusResult },
      {
        description:
          'Queued (Prefer: respond-async, or sendAt): stored as pending; the outcome arrives as a MessageStatus event',
      },
    ),
  };
}

/** What a status post answers: the send's envelope with `recipients` added. */
type StatusEnvelope =
  | { success: true; code: 200; data: StatusResult }
  | { success: true; code: 202; data: QueuedStatusResult };

/**
 * Posts one status: its audience (`contacts`, else the default, {@link StatusService.audience}), then the send
 * path of every message (docs/decisions/0009-sends-as-jobs.md) to `status@broadcast` with that audience.
 */
async function postStatus(
  services: HttpServices,
  request: FastifyRequest,
  reply: FastifyReply,
  input: { contacts?: readonly string[] | undefined; sendAt?: string | undefined },
  content: () => Promise<OutgoingContent> | OutgoingContent,
): Promise<StatusEnvelope> {
  const audience = await services.app.status.audience(instanceOf(request), input.contacts);
  const sent = await sendMessage(
    services,
    request,
    reply,
    { phone: STATUS_BROADCAST, sendAt: input.sendAt, statusJidList: audience },
    content,
  );
  return sent.code === 200
    ? { ...sent, data: { ...sent.data, recipients: audience.length } }
    : { ...sent, data: { ...sent.data, recipients: audience.length } };
}

/**
 * `/v1/status/*` (docs/api.md#status, docs/decisions/0044-status-stories.md): text, image and video status updates
 * (stories), under scope `chat:messages` (docs/decisions/0003-scopes-and-keys.md); the posting instance is the
 * body field `from`, as for sends (docs/decisions/0002-instance-resolution.md). Media are taken, checked and limited
 * as the media sends take them (docs/decisions/0017-messages-and-media.md).
 */
export async function statusRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const shared: MediaTools = { guard: services.guard, ffmpeg: new Ffmpeg(services.config.ffmpegPath) };
  const toolsOf = (request: FastifyRequest): MediaTools => ({ ...shared, log: request.log });
  const config = { scope: 'chat:messages', instance: 'body' } as const;
  /** A send's job follows from the forward id: a forward that lost its connection is sent again. */
  const sendConfig = { ...config, repeatable: true } as const;

  app.post(
    '/text',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'postTextStatus',
        summary: 'Post a text status (story) with an optional background colour and font',
        body: StatusTextBody,
        response: statusResponses(502, 503),
      },
    },
    async (request, reply) => {
      const { body, backgroundColor, font } = request.body;
      checkStatusFont(font);
      const backgroundArgb = backgroundColor === undefined ? undefined : backgroundArgbOf(backgroundColor);
      return postStatus(services, request, reply, request.body, () => ({
        kind: 'text',
        text: body,
        linkPreview: false,
        ...(backgroundArgb === undefined ? {} : { backgroundArgb }),
        ...(font === undefined ? {} : { font }),
      }));
    },
  );

  app.post(
    '/image',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('image'),
      schema: {
        tags,
        operationId: 'postImageStatus',
        summary:
          'Post an image status (JPEG, PNG, GIF or WEBP, at most 16 MB and 32,000,000 pixels) by https URL or data URI',
        body: StatusImageBody,
        response: statusResponses(413, 422, 502, 503),
      },
    },
    async (request, reply) => {
      const { image, caption } = request.body;
      return postStatus(services, request, reply, request.body, async () => ({
        kind: 'image',
        media: await prepareMedia(toolsOf(request), 'image', image),
        ...(caption === undefined ? {} : { caption }),
      }));
    },
  );

  app.post(
    '/video',
    {
      config: sendConfig,
      bodyLimit: bodyLimitFor('video'),
      schema: {
        tags,
        operationId: 'postVideoStatus',
        summary: 'Post a video status (MP4 or 3GP, at most 16 MB) by https URL or data URI',
        body: StatusVideoBody,
        response: statusResponses(413, 422, 502, 503),
      },
    },
    async (request, reply) => {
      const { video, caption } = request.body;
      return postStatus(services, request, reply, request.body, async () => ({
        kind: 'video',
        media: await prepareMedia(toolsOf(request), 'video', video),
        ...(caption === undefined ? {} : { caption }),
      }));
    },
  );
}
