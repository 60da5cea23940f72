import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ChatPresenceState } from '../../../domain/messages.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, InstanceSelector, ok, responses } from '../../schemas.ts';
import { ChatAddress } from './messages-schemas.ts';

/** The presence states `POST /v1/chats/presence` accepts (WhatsApp chatstate and availability). */
export const CHAT_PRESENCE_STATES: readonly ChatPresenceState[] = [
  'composing',
  'recording',
  'paused',
  'available',
  'unavailable',
];

/** Body of `POST /v1/chats/presence`. */
export const ChatPresenceBody = Type.Object(
  {
    phone: ChatAddress('the chat: phone number or group JID'),
    state: Type.Unsafe<ChatPresenceState>({
      type: 'string',
      enum: [...CHAT_PRESENCE_STATES],
      'x-message': `{field} must be one of ${CHAT_PRESENCE_STATES.join(', ')}`,
      description:
        'composing (typing), recording (a voice note), paused (stopped typing), available or unavailable (online status)',
      examples: ['composing'],
    }),
    from: Type.Optional({
      ...InstanceSelector,
      description: 'the instance: its UUID or linked phone number; omitted: the most recently connected',
      examples: ['5511999990001'],
    }),
  },
  { title: 'ChatPresenceBody' },
);
export type ChatPresenceBody = Static<typeof ChatPresenceBody>;

/**
 * `POST /v1/chats/presence` (docs/decisions/0026-chats-edits-polls-and-calls.md): shows typing, recording or paused
 * in a chat, or the account's availability. Scope `chat:messages`, the scope of what the instance says in chats
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export async function chatPresenceRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { messageUpdates } = app.services.app;

  app.post(
    '/presence',
    {
      config: { scope: 'chat:messages', instance: 'body' },
      schema: {
        tags: ['chats'],
        operationId: 'sendChatPresence',
        summary: 'Show typing, recording or paused in a chat, or go available / unavailable',
        body: ChatPresenceBody,
        response: responses('Presence sent', Details, 409, 422, 502, 503),
      },
    },
    async (request) => {
      const { phone, state } = request.body;
      await messageUpdates.presence(instanceOf(request), { phone, state });
      return ok({ details: `Presence ${state} sent` });
    },
  );
}
