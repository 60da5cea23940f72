/**
 * Control API, part 3: the account's past conversations, which the phone sends to every companion linked
 * afterwards in its initial history sync (messaging/history.ts). `POST /control/history` sets them (replacing
 * any given before) and answers them with the message ids the simulator gave.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { newMessageId } from '../messaging/send.ts';
import type { HistoryChat } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const History = Type.Object(
  {
    phone: Phone,
    chats: Type.Array(
      Type.Object(
        {
          with: Phone,
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
          messages: Type.Array(
            Type.Object(
              {
                fromMe: Type.Boolean(),
                text: Type.String({ minLength: 1, maxLength: 65536 }),
                timestamp: Type.Optional(Type.String({ format: 'date-time' })),
              },
              { additionalProperties: false },
            ),
            { minItems: 1, maxItems: 100 },
          ),
        },
        { additionalProperties: false },
      ),
      { maxItems: 100 },
    ),
  },
  { additionalProperties: false },
);

/** The JSON view of one past conversation: messages oldest first, times as ISO 8601. */
function chatView(chat: HistoryChat) {
  return {
    with: chat.peer,
    name: chat.name,
    messages: [...chat.messages].reverse().map((m) => ({
      id: m.id,
      fromMe: m.fromMe,
      text: m.text,
      timestamp: new Date(m.timestamp * 1000).toISOString(),
    })),
  };
}

/** Registers `POST /control/history`. */
export function registerHistoryRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: Static<typeof History> }>(
    '/control/history',
    { schema: { body: History } },
    async (request) => {
      const { phone, chats } = request.body;
      const account = ctx.accounts.require(phone, 'phone');
      const now = Math.floor(Date.now() / 1000);
      const history: HistoryChat[] = chats.map((chat, c) => {
        const peer = ctx.accounts.require(chat.with, `chats.${c}.with`);
        if (peer === account) throw new ControlError(400, `chats.${c}.with: must differ from phone`);
        const count = chat.messages.length;
        const messages = chat.messages.map((m, i) => ({
          id: newMessageId(),
          fromMe: m.fromMe,
          text: m.text,
          // Default times: one second apart, the last message now.
          timestamp: m.timestamp ? Math.floor(Date.parse(m.timestamp) / 1000) : now - (count - 1 - i),
        }));
        return { peer: peer.phone, name: chat.name ?? '', messages: messages.reverse() };
      });
      account.history = history;
      return { phone, chats: history.map(chatView) };
    },
  );
}
