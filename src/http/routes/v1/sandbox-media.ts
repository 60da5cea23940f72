import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { bodyLimitFor } from '../../../media/kinds.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';
import { GroupJid, InboundResult, StringEnum } from './sandbox.ts';

/** Body of `POST /v1/sandbox/inbound/media`: a simulated user sends a media file. */
export const InboundMediaBody = Type.Object(
  {
    phone: Phone('the simulated user the file comes from'),
    kind: StringEnum(['image', 'video', 'audio', 'document', 'sticker'] as const, 'image'),
    media: Type.String({
      minLength: 6,
      pattern: '^\\s*[dD][aA][tT][aA]:',
      'x-message': '{field} must be a data URI (data:<type>;base64,<data>)',
      description:
        'the file as a base64 data URI, at most 16 MB; its declared type is the MIME type the message carries (default by kind)',
      examples: ['data:image/png;base64,iVBORw0KGgo…'],
    }),
    caption: Type.Optional(
      Type.String({
        maxLength: 65_536,
        description: 'image, video and document only',
        examples: ['Broken part'],
      }),
    ),
    fileName: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'document only (default `file`)',
        examples: ['order.pdf'],
      }),
    ),
    ptt: Type.Optional(
      Type.Boolean({ description: 'audio only: true for a voice note (default false)', examples: [true] }),
    ),
    groupJid: Type.Optional({
      ...GroupJid,
      description: 'the group the file is sent in (instance must be a member)',
    }),
    pushName: Type.Optional(
      Type.String({
        maxLength: 200,
        description: "the sender's display name on this message",
        examples: ['Ana'],
      }),
    ),
  },
  { title: 'InboundMediaBody' },
);
export type InboundMediaBody = Static<typeof InboundMediaBody>;

/**
 * `POST /v1/sandbox/inbound/media` (a sandbox test helper: `svc_test_` keys only, scope `chat:session`): a
 * simulated user sends the instance an image, video, audio or voice note, document or sticker. The Message event
 * carries the file's metadata and its `media.url`, and `GET /v1/messages/{id}/media` returns the same bytes.
 */
export async function sandboxMediaRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;

  app.post(
    '/inbound/media',
    {
      config: { scope: 'chat:session', testOnly: true, instance: 'query' },
      bodyLimit: bodyLimitFor('image'),
      schema: {
        tags: ['sandbox'],
        operationId: 'sandboxInboundMedia',
        summary:
          'A simulated user sends a media file (image, video, audio, document, sticker): Message event',
        querystring: InstanceQuery,
        body: InboundMediaBody,
        response: responses(
          'The file was delivered to the instance; the message id',
          InboundResult,
          409,
          413,
          422,
        ),
      },
    },
    async (request) => {
      const { phone, kind, media, caption, fileName, ptt, groupJid, pushName } = request.body;
      const sent = await sandbox.inboundMedia(instanceOf(request), {
        phone,
        kind,
        media,
        ...(caption === undefined ? {} : { caption }),
        ...(fileName === undefined ? {} : { fileName }),
        ...(ptt === undefined ? {} : { ptt }),
        ...(groupJid === undefined ? {} : { groupJid }),
        ...(pushName === undefined ? {} : { pushName }),
      });
      return ok({ id: sent.id });
    },
  );
}
