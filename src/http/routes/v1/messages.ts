import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { isGroupAddress } from '../../../app/messaging.ts';
import { checkVcard } from '../../../domain/content-rules.ts';
import { errors } from '../../../domain/errors.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, ok, responses } from '../../schemas.ts';
import { messageDownloadRoutes } from './messages-download.ts';
import { messageMediaRoutes } from './messages-media.ts';
import {
  ForwardBody,
  ReactBody,
  ReadBody,
  SendContactBody,
  SendLocationBody,
  SendResult,
  SendTextBody,
  sendResponses,
} from './messages-schemas.ts';
import { checkMentions, isReactionEmoji, sendMessage, sendResult } from './messages-send.ts';
import { messageUpdateRoutes } from './messages-updates.ts';

const tags = ['messages'];

/**
 * `/v1/messages/*` (docs/api.md#messages; docs/decisions/0017-messages-and-media.md): text, location and contact
 * sends, forwards (docs/decisions/0041-forward-calls-channels.md), reactions and read receipts here; media sends in `messages-media.ts`. Scope `chat:messages`
 * (docs/decisions/0003-scopes-and-keys.md); the sending instance is the body field `from`
 * (docs/decisions/0002-instance-resolution.md). Every send answers `{ details: 'Sent', id, timestamp }` once the
 * message is stored.
 */
export async function messagesRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const { messaging } = services.app;
  const config = { scope: 'chat:messages', instance: 'body' } as const;
  /** A send's job follows from the forward id: a forward that lost its connection is sent again. */
  const sendConfig = { ...config, repeatable: true } as const;
  const sendErrors = [409, 422, 502, 503];

  app.post(
    '/send',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'sendText',
        summary: 'Send a text message (at most 65,536 characters)',
        body: SendTextBody,
        response: sendResponses('Message sent: its id and timestamp', ...sendErrors),
      },
    },
    async (request, reply) => {
      const body = request.body;
      checkMentions(body.mentions, body.body, 'body');
      return sendMessage(services, request, reply, body, () => ({
        kind: 'text',
        text: body.body,
        linkPreview: body.linkPreview ?? false,
      }));
    },
  );

  app.post(
    '/forward',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'forwardMessage',
        summary: 'Forward a stored message (any kind parley keeps) to a chat, marked forwarded',
        body: ForwardBody,
        response: sendResponses('Message forwarded: the new message id and timestamp', ...sendErrors),
      },
    },
    async (request, reply) => {
      const { phone, messageId, sendAt } = request.body;
      const prepared = await services.app.forward.prepare(instanceOf(request), messageId);
      return sendMessage(
        services,
        request,
        reply,
        { phone, sendAt, forwardingScore: prepared.forwardingScore },
        prepared.content,
      );
    },
  );

  app.post(
    '/send/location',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'sendLocation',
        summary: 'Send a location pin',
        body: SendLocationBody,
        response: sendResponses('Message sent: its id and timestamp', ...sendErrors),
      },
    },
    async (request, reply) => {
      const { latitude, longitude, name, address } = request.body;
      return sendMessage(services, request, reply, request.body, () => ({
        kind: 'location',
        latitude,
        longitude,
        ...(name === undefined ? {} : { name }),
        ...(address === undefined ? {} : { address }),
      }));
    },
  );

  app.post(
    '/send/contact',
    {
      config: sendConfig,
      schema: {
        tags,
        operationId: 'sendContact',
        summary: 'Send a contact card (vCard with BEGIN:VCARD, N, FN, TEL, END:VCARD)',
        body: SendContactBody,
        response: sendResponses('Message sent: its id and timestamp', ...sendErrors),
      },
    },
    async (request, reply) => {
      const { name, vcard } = request.body;
      checkVcard(vcard);
      return sendMessage(services, request, reply, request.body, () => ({
        kind: 'contact',
        displayName: name,
        vcard,
      }));
    },
  );

  app.post(
    '/react',
    {
      config,
      schema: {
        tags,
        operationId: 'sendReaction',
        summary: 'React to a message with an emoji ("" removes the reaction); `me:` prefixes own messages',
        body: ReactBody,
        response: responses(
          'Reaction sent: the id of the message reacted to, and the timestamp',
          SendResult,
          ...sendErrors,
        ),
      },
    },
    async (request) => {
      const { phone, id, body, senderPhone } = request.body;
      if (!isReactionEmoji(body))
        throw errors.badRequest('body must be one emoji, or empty to remove the reaction');
      const fromMe = id.startsWith('me:');
      const target = fromMe ? id.slice(3) : id;
      if (target === '') throw errors.badRequest('id must name a message after the me: prefix');
      const sent = await messaging.react(instanceOf(request), {
        phone,
        targetId: target,
        fromMe,
        emoji: body,
        senderPhone,
      });
      return ok(sendResult(sent, target));
    },
  );

  app.post(
    '/read',
    {
      config,
      schema: {
        tags,
        operationId: 'markRead',
        summary: 'Mark received messages as read (sends read receipts to their sender)',
        body: ReadBody,
        response: responses('Read receipts sent', Details, 409, 422, 502, 503),
      },
    },
    async (request) => {
      const { id, chatPhone, senderPhone } = request.body;
      if (isGroupAddress(chatPhone) && senderPhone === undefined) {
        throw errors.badRequest('senderPhone is required for group chats');
      }
      await messaging.markRead(instanceOf(request), { chatPhone, ids: id, senderPhone });
      return ok({ details: 'Marked as read' });
    },
  );

  await app.register(messageMediaRoutes);
  await app.register(messageDownloadRoutes);
  await app.register(messageUpdateRoutes);
}
