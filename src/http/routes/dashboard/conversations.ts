import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { phoneOfJid } from '../../../domain/messages.ts';
import { ok } from '../../schemas.ts';
import { ChatParams, chatView, PageQuery, storedMessageView } from '../v1/chats-schemas.ts';
import { sendMediaFile } from '../v1/messages-download.ts';
import { sendResult } from '../v1/messages-send.ts';
import { InstanceParams, instanceFor } from './instances.ts';

/** A reply typed in a conversation: text, 1 to 4,096 characters (the limit of `POST /v1/messages/send`). */
const ReplyBody = Type.Object({
  body: Type.String({
    minLength: 1,
    maxLength: 4096,
    'x-message': '{field} must be 1 to 4096 characters',
  }),
});

const ChatRouteParams = Type.Composite([InstanceParams, ChatParams]);
const MediaRouteParams = Type.Composite([
  InstanceParams,
  Type.Object({ messageId: Type.String({ minLength: 1, maxLength: 100 }) }),
]);

/**
 * An instance's conversations in the dashboard (docs/decisions/0022-dashboard.md, docs/dashboard.md#conversations):
 * the chat list and a chat's messages (the services of `GET /v1/chats` and `GET /v1/chats/{jid}/messages`, in their
 * shapes and paging), the file of a received media message (`GET /v1/messages/{id}/media`'s service, for previews),
 * and a text reply sent through the messaging service of `POST /v1/messages/send` (pacing, the send log and the
 * webhook's MessageStatus events as for any send). Reading takes the viewer role, replying the member role; every
 * route runs on the node holding the instance (routing.ts).
 */
export async function conversationRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { chats, media, messaging } = app.services.app;
  const viewer = { dashboard: 'viewer' } as const;
  const member = { dashboard: 'member' } as const;

  app.get(
    '/instances/:id/chats',
    { config: viewer, schema: { hide: true, params: InstanceParams, querystring: PageQuery } },
    async (request) => {
      const { limit, cursor } = request.query;
      const page = await chats.list(await instanceFor(app, request), { limit, cursor });
      return ok({ chats: page.items.map(chatView), nextCursor: page.nextCursor });
    },
  );

  app.get(
    '/instances/:id/chats/:jid/messages',
    { config: viewer, schema: { hide: true, params: ChatRouteParams, querystring: PageQuery } },
    async (request) => {
      const { limit, cursor } = request.query;
      const instance = await instanceFor(app, request);
      const page = await chats.history(instance, request.params.jid, { limit, cursor });
      return ok({ messages: page.items.map(storedMessageView), nextCursor: page.nextCursor });
    },
  );

  app.post(
    '/instances/:id/chats/:jid/reply',
    { config: member, schema: { hide: true, params: ChatRouteParams, body: ReplyBody } },
    async (request) => {
      const instance = await instanceFor(app, request);
      // The chat list names a 1:1 chat by its user JID; a send takes the phone number (a group by its JID).
      const { jid } = request.params;
      const phone = phoneOfJid(jid) ?? jid;
      const sent = await messaging.send(instance, { phone }, () => ({
        kind: 'text',
        text: request.body.body,
        linkPreview: false,
      }));
      return ok(sendResult(sent));
    },
  );

  app.get(
    '/instances/:id/messages/:messageId/media',
    { config: viewer, schema: { hide: true, params: MediaRouteParams } },
    async (request, reply) => {
      const file = await media.open(await instanceFor(app, request), request.params.messageId);
      return sendMediaFile(reply, file, request.params.messageId);
    },
  );
}
