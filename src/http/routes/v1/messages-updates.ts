import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { checkPoll, MAX_POLL_OPTIONS } from '../../../domain/content-rules.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceSelector, ok, responses } from '../../schemas.ts';
import { ChatAddress, MAX_TEXT, SendAt, sendResponses } from './messages-schemas.ts';
import { sendMessage, sendResult } from './messages-send.ts';

const tags = ['messages'];

const From = Type.Optional({
  ...InstanceSelector,
  description: 'sending instance: its UUID or linked phone number; omitted: the most recently connected',
  examples: ['5511999990001'],
});

const OwnMessageId = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'id of a message this instance sent in that chat',
  examples: ['3EB0C767D26A1D2E5B3A61'],
});

/** Body of `POST /v1/messages/edit`: the instance's own text message, within 15 minutes of sending. */
export const EditBody = Type.Object(
  {
    phone: ChatAddress('the chat of the message: phone number or group JID'),
    id: OwnMessageId,
    body: Type.String({
      minLength: 1,
      maxLength: MAX_TEXT,
      description: 'the new text',
      examples: ['Hello *world*! Your order ships tomorrow.'],
    }),
    from: From,
  },
  { title: 'EditBody' },
);
export type EditBody = Static<typeof EditBody>;

/** Body of `POST /v1/messages/delete`: the instance's own message, within 48 hours of sending. */
export const DeleteBody = Type.Object(
  {
    phone: ChatAddress('the chat of the message: phone number or group JID'),
    id: OwnMessageId,
    from: From,
  },
  { title: 'DeleteBody' },
);
export type DeleteBody = Static<typeof DeleteBody>;

/** Body of `POST /v1/messages/send/poll` (WhatsApp: 2–12 options; a question of at most 255 characters). */
export const SendPollBody = Type.Object(
  {
    phone: ChatAddress(),
    name: Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'the question',
      examples: ['Which day suits you?'],
    }),
    options: Type.Array(
      Type.String({ minLength: 1, maxLength: 100, 'x-message': '{field} must be 1 to 100 characters' }),
      {
        minItems: 2,
        maxItems: MAX_POLL_OPTIONS,
        description: '2 to 12 unique, non-empty option names',
        examples: [['Monday', 'Tuesday', 'Friday']],
      },
    ),
    selectableCount: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_POLL_OPTIONS,
        default: 0,
        description: 'how many options a voter may pick: 0 = any number, else 1 to the number of options',
        examples: [1],
      }),
    ),
    from: From,
    sendAt: SendAt,
  },
  { title: 'SendPollBody' },
);
export type SendPollBody = Static<typeof SendPollBody>;

/** Result of an edit or a deletion: the message's id and the time of the change. */
export const UpdateResult = Type.Object(
  {
    details: Type.String({ examples: ['Edited'] }),
    id: Type.String({ description: 'id of the changed message', examples: ['3EB0C767D26A1D2E5B3A61'] }),
    timestamp: Type.String({ format: 'date-time', examples: ['2025-01-15T12:05:00.000Z'] }),
  },
  { title: 'UpdateResult' },
);
export type UpdateResult = Static<typeof UpdateResult>;

/**
 * `POST /v1/messages/edit`, `/v1/messages/delete` and `/v1/messages/send/poll`
 * (docs/decisions/0026-chats-edits-polls-and-calls.md). Scope `chat:messages` like every `/v1/messages/*` operation
 * (docs/decisions/0003-scopes-and-keys.md); the instance is the body field `from`.
 */
export async function messageUpdateRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const { messageUpdates } = services.app;
  const config = { scope: 'chat:messages', instance: 'body' } as const;
  /** A send's job follows from the forward id: a forward that lost its connection is sent again. */
  const sendConfig = { ...config, repeatable: true } as const;

  app.post(
    '/edit',
    {
      config,
      schema: {
        tags,
        operationId: 'editMessage',
        summary: 'Edit the text of a text message this instance sent (within 15 minutes of sending)',
        body: EditBody,
        response: responses('Message edited: its id and the time of the edit', UpdateResult, 409, 502, 503),
      },
    },
    async (request) => {
      const { phone, id, body } = request.body;
      const edited = await messageUpdates.edit(instanceOf(request), { phone, id, body });
      return ok({ ...sendResult(edited), details: 'Edited' });
    },
  );

  app.post(
    '/delete',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteMessage',
        summary: 'Delete a message this instance sent, for everyone (within 48 hours of sending)',
        body: DeleteBody,
        response: responses(
          'Message deleted for everyone: its id and the time of the deletion',
          UpdateResult,
          409,
          502,
          503,
        ),
      },
    },
    async (request) => {
      const { phone, id } = request.body;
      const deleted = await messageUpdates.revoke(instanceOf(request), { phone, id });
      return ok({ ...sendResult(deleted), details: 'Deleted' });
    },
  );

  app.post(
    '/send/poll',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'sendPoll',
        summary: 'Send a poll (2 to 12 options); votes arrive as PollVote events',
        body: SendPollBody,
        response: sendResponses('Poll sent: its id and timestamp', 409, 422, 502, 503),
      },
    },
    async (request, reply) => {
      const { name, options } = request.body;
      const selectableCount = request.body.selectableCount ?? 0;
      checkPoll(name, options, selectableCount);
      return sendMessage(
        services,
        request,
        reply,
        { phone: request.body.phone, sendAt: request.body.sendAt },
        () => ({
          kind: 'poll',
          name,
          options: [...options],
          selectableCount,
        }),
      );
    },
  );
}
