import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, responses } from '../../schemas.ts';
import {
  ChatPage,
  ChatParams,
  chatView,
  HistoryPage,
  MessageParams,
  PageQuery,
  StoredMessageView,
  storedMessageView,
} from './chats-schemas.ts';

/**
 * `/v1/chats` (docs/decisions/0026-chats-edits-polls-and-calls.md): the chat list and a chat's stored history, read
 * from the message store. Scope `chat:messages` (docs/decisions/0003-scopes-and-keys.md: the message family's reads),
 * instance from query `from` (docs/decisions/0002-instance-resolution.md).
 */
export async function chatsRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { chats } = app.services.app;
  const config = { scope: 'chat:messages', instance: 'query' } as const;
  const tags = ['chats'];

  app.get(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'listChats',
        summary: 'Chats with their latest message and unread count, most recent activity first (paged)',
        querystring: PageQuery,
        response: responses('A page of chats and the cursor of the next page', ChatPage),
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      const page = await chats.list(instanceOf(request), { limit, cursor });
      return ok({ chats: page.items.map(chatView), nextCursor: page.nextCursor });
    },
  );

  app.get(
    '/:jid/messages',
    {
      config,
      schema: {
        tags,
        operationId: 'listChatMessages',
        summary: "A chat's stored messages, newest first (paged)",
        params: ChatParams,
        querystring: PageQuery,
        response: responses('A page of messages and the cursor of the next page', HistoryPage),
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      const page = await chats.history(instanceOf(request), request.params.jid, { limit, cursor });
      return ok({ messages: page.items.map(storedMessageView), nextCursor: page.nextCursor });
    },
  );
}

/**
 * `GET /v1/messages/{id}` (docs/decisions/0026-chats-edits-polls-and-calls.md): one stored message with its delivery
 * state. Scope `chat:messages` (docs/decisions/0003-scopes-and-keys.md), instance from query `from`
 * (docs/decisions/0002-instance-resolution.md). Registered under the `/v1/messages` prefix.
 */
export async function messageReadRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { chats, messaging } = app.services.app;
  app.get(
    '/:id',
    {
      config: { scope: 'chat:messages', instance: 'query' },
      schema: {
        tags: ['messages'],
        operationId: 'getMessage',
        summary: 'One stored message with its delivery state (404 when the instance never stored it)',
        params: MessageParams,
        querystring: InstanceQuery,
        response: responses('The message and its delivery state', StoredMessageView),
      },
    },
    async (request) => ok(storedMessageView(await chats.message(instanceOf(request), request.params.id))),
  );

  app.post(
    '/:id/cancel',
    {
      config: { scope: 'chat:messages', instance: 'query' },
      schema: {
        tags: ['messages'],
        operationId: 'cancelMessage',
        summary: 'Cancel a queued or scheduled send before its relay (409 once it was sent)',
        params: MessageParams,
        querystring: InstanceQuery,
        response: responses(
          'The send is canceled and will never be relayed',
          Type.Object(
            {
              details: Type.Literal('Canceled'),
              id: Type.String({ examples: ['3EB0C767D26A1D2E5B3A61'] }),
              status: Type.Literal('canceled'),
            },
            { title: 'CancelResult' },
          ),
          409,
        ),
      },
    },
    async (request) => {
      const canceled = await messaging.cancel(instanceOf(request), request.params.id);
      return ok({ details: 'Canceled' as const, id: canceled.id, status: canceled.status });
    },
  );
}
