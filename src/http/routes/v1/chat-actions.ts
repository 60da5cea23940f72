import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ChatActionName } from '../../../app/chat-actions.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, responses } from '../../schemas.ts';
import { ChatParams, MessageParams } from './chats-schemas.ts';

/** Body of `POST /v1/chats/{jid}/mute`: `until` omitted mutes until unmuted. */
export const MuteBody = Type.Object(
  {
    until: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'end of the mute, an RFC 3339 time in the future; omitted: muted until unmuted',
        examples: ['2030-01-01T00:00:00Z'],
      }),
    ),
  },
  { title: 'MuteBody', additionalProperties: false },
);
export type MuteBody = Static<typeof MuteBody>;

/** Answer of a chat action (docs/api.md#chats). */
export const ChatActionResult = Type.Object(
  {
    details: Type.String({
      description:
        'what was done: Archived, Unarchived, Pinned, Unpinned, Muted, Unmuted or Marked as unread',
      examples: ['Archived'],
    }),
    chat: Type.String({ description: 'the chat JID', examples: ['5511988887777@s.whatsapp.net'] }),
  },
  { title: 'ChatActionResult' },
);

/** Answer of `POST /v1/chats/{jid}/mute`: the chat action answer and the end of the mute. */
export const MuteResult = Type.Object(
  {
    details: Type.Literal('Muted'),
    chat: Type.String({ description: 'the chat JID', examples: ['5511988887777@s.whatsapp.net'] }),
    mutedUntil: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'end of the mute (RFC 3339, UTC); null: muted until unmuted',
      examples: ['2030-01-01T00:00:00.000Z'],
    }),
  },
  { title: 'MuteResult' },
);

/** Answer of `POST /v1/messages/{id}/star` and `/unstar`. */
export const StarResult = Type.Object(
  {
    details: Type.Union([Type.Literal('Starred'), Type.Literal('Unstarred')]),
    id: Type.String({ description: "the message's id", examples: ['3EB0C767D26A1D2E5B3A61'] }),
    chat: Type.String({ description: "the message's chat JID", examples: ['5511988887777@s.whatsapp.net'] }),
  },
  { title: 'StarResult' },
);

/** The body-less chat actions: path segment, operationId, summary and the answer's `details`. */
const ACTIONS: readonly {
  name: Exclude<ChatActionName, 'mute'>;
  id: string;
  summary: string;
  details: string;
}[] = [
  { name: 'archive', id: 'archiveChat', summary: 'Archive a chat', details: 'Archived' },
  {
    name: 'unarchive',
    id: 'unarchiveChat',
    summary: 'Move a chat out of the archive',
    details: 'Unarchived',
  },
  { name: 'pin', id: 'pinChat', summary: 'Pin a chat to the top of the chat list', details: 'Pinned' },
  { name: 'unpin', id: 'unpinChat', summary: 'Unpin a chat', details: 'Unpinned' },
  { name: 'unmute', id: 'unmuteChat', summary: "Unmute a chat's notifications", details: 'Unmuted' },
  {
    name: 'mark-unread',
    id: 'markChatUnread',
    summary: 'Mark a chat as unread',
    details: 'Marked as unread',
  },
];

/**
 * `POST /v1/chats/{jid}/<action>` (docs/api.md#chats, docs/decisions/0043-chat-actions-and-star.md):
 * archive, unarchive, pin, unpin, mute, unmute and mark unread a chat. Scope `chat:messages`
 * (docs/decisions/0003-scopes-and-keys.md: what the instance does in its chats), instance from query `from`
 * (docs/decisions/0002-instance-resolution.md). Registered under the `/v1/chats` prefix.
 */
export async function chatActionRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { chatActions } = app.services.app;
  const config = { scope: 'chat:messages', instance: 'query' } as const;
  const tags = ['chats'];

  for (const action of ACTIONS) {
    app.post(
      `/:jid/${action.name}`,
      {
        config,
        schema: {
          tags,
          operationId: action.id,
          summary: action.summary,
          params: ChatParams,
          querystring: InstanceQuery,
          response: responses(`${action.details}: the chat's state changed`, ChatActionResult, 409, 502, 503),
        },
      },
      async (request) => {
        const done = await chatActions.apply(instanceOf(request), request.params.jid, action.name);
        return ok({ details: action.details, chat: done.chat });
      },
    );
  }

  app.post(
    '/:jid/mute',
    {
      config,
      schema: {
        tags,
        operationId: 'muteChat',
        summary: "Mute a chat's notifications until a time, or until unmuted",
        params: ChatParams,
        querystring: InstanceQuery,
        body: MuteBody,
        response: responses('Muted: the chat is muted until mutedUntil', MuteResult, 409, 502, 503),
      },
    },
    async (request) => {
      const done = await chatActions.apply(
        instanceOf(request),
        request.params.jid,
        'mute',
        request.body.until,
      );
      return ok({
        details: 'Muted' as const,
        chat: done.chat,
        mutedUntil: done.mutedUntil === null ? null : new Date(done.mutedUntil).toISOString(),
      });
    },
  );
}

/**
 * `POST /v1/messages/{id}/star` and `/unstar` (docs/api.md#chats,
 * docs/decisions/0043-chat-actions-and-star.md): star or unstar a stored message of the instance (404 `message not
 * found` otherwise). Scope `chat:messages`, instance from query `from`. Registered under the `/v1/messages` prefix.
 */
export async function starRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { chatActions } = app.services.app;
  for (const star of [true, false]) {
    app.post(
      star ? '/:id/star' : '/:id/unstar',
      {
        config: { scope: 'chat:messages', instance: 'query' },
        schema: {
          tags: ['messages'],
          operationId: star ? 'starMessage' : 'unstarMessage',
          summary: star ? 'Star a stored message' : 'Unstar a stored message',
          params: MessageParams,
          querystring: InstanceQuery,
          response: responses(
            star ? 'The message is starred' : 'The message is no longer starred',
            StarResult,
            409,
            502,
            503,
          ),
        },
      },
      async (request) => {
        const done = await chatActions.star(instanceOf(request), request.params.id, star);
        return ok({
          details: star ? ('Starred' as const) : ('Unstarred' as const),
          id: done.id,
          chat: done.chat,
        });
      },
    );
  }
}
