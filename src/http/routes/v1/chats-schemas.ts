import { type Static, Type } from '@sinclair/typebox';
import {
  type ChatSummary,
  DEFAULT_PAGE,
  MAX_PAGE,
  type MessageWithStatus,
  type StoredMessage,
} from '../../../app/chats.ts';
import { messageBody } from '../../../events/normalise.ts';
import { InstanceQuery } from '../../schemas.ts';

/**
 * Schemas and views of the chats and history operations (docs/decisions/0026-chats-edits-polls-and-calls.md). Times
 * are RFC 3339 UTC.
 */

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Query of the paged reads: `limit`, `cursor`, and the instance selector `from`
 * (docs/decisions/0002-instance-resolution.md).
 */
export const PageQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_PAGE,
      'x-message': `{field} must be an integer from 1 to ${MAX_PAGE}`,
      description: `page size, 1 to ${MAX_PAGE} (default ${DEFAULT_PAGE})`,
      examples: [20],
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'the `nextCursor` of the previous page; omitted: the first page',
      examples: ['WyIyMDI2LTAxLTE1VDEyOjAwOjAwLjAwMFoiLCI1NTExOTg4ODg3Nzc3QHMud2hhdHNhcHAubmV0Il0'],
    }),
  ),
  from: InstanceQuery.properties.from,
});
export type PageQuery = Static<typeof PageQuery>;

/** Path of `GET /v1/chats/{jid}/messages`. */
export const ChatParams = Type.Object({
  jid: Type.String({
    minLength: 1,
    maxLength: 160,
    description:
      'the chat: a phone number, a user JID (<phone>@s.whatsapp.net), a group JID (<id>@g.us) or a LID (<digits>@lid)',
    examples: ['5511988887777'],
  }),
});
export type ChatParams = Static<typeof ChatParams>;

/** Path of `GET /v1/messages/{id}`. */
export const MessageParams = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: 128,
    description: "the message's id",
    examples: ['3EB0C767D26A1D2E5B3A61'],
  }),
});
export type MessageParams = Static<typeof MessageParams>;

const DeliveryStateName = Type.Union(
  [Type.Literal('sent'), Type.Literal('delivered'), Type.Literal('read'), Type.Literal('played')],
  {
    description:
      'delivery state, moving only forward: sent → delivered → read → played. Own messages move with the ' +
      "recipient's receipts (in a group, the first member's); received messages are delivered, then read once " +
      'marked read',
  },
);

/** A stored message as the history and message reads show it. */
export const StoredMessageView = Type.Object(
  {
    id: Type.String({ examples: ['3EB0C767D26A1D2E5B3A61'] }),
    chat: Type.String({ description: 'chat JID', examples: ['5511988887777@s.whatsapp.net'] }),
    sender: Type.String({ description: "sender's JID", examples: ['5511999990001@s.whatsapp.net'] }),
    fromMe: Type.Boolean({ description: 'sent by this instance' }),
    isGroup: Type.Boolean(),
    pushName: Type.String({ description: "the sender's display name; empty when none", examples: ['Ana'] }),
    timestamp: Type.String({ description: 'when it was sent', examples: ['2026-01-15T12:00:00.000Z'] }),
    kind: Type.String({
      description:
        'text, image, document, audio, video, sticker, location, contact, reaction, poll, interactive_reply (a ' +
        "user's pick in an interactive message: a button, list row or template button, or a completed flow), or " +
        'other for anything else',
      examples: ['text'],
    }),
    message: Type.Object(
      { conversation: Type.String({ description: 'the text or caption; empty when none' }) },
      {
        additionalProperties: true,
        description: 'the content, in the same shape as event.message of a Message webhook',
      },
    ),
    state: Type.Optional(DeliveryStateName),
    stateAt: Type.Optional(
      Type.String({
        description: 'when the state last changed (absent until the platform acknowledged the message)',
        examples: ['2026-01-15T12:00:03.000Z'],
      }),
    ),
    status: Type.Optional(
      Type.Union(
        [
          Type.Literal('pending'),
          Type.Literal('sent'),
          Type.Literal('delivered'),
          Type.Literal('read'),
          Type.Literal('played'),
          Type.Literal('failed'),
          Type.Literal('canceled'),
        ],
        {
          description:
            'GET /v1/messages/{id} only: the delivery state once relayed; before, pending (queued, scheduled or being relayed), failed or canceled; sent for a send that went out while storing it failed',
        },
      ),
    ),
    error: Type.Optional(Type.String({ description: "why a failed send failed (the platform's reason)" })),
    sendAt: Type.Optional(Type.String({ description: 'when a scheduled send is due', format: 'date-time' })),
    editedAt: Type.Optional(
      Type.String({
        description: 'when the text was last edited (absent when never)',
        examples: ['2026-01-15T12:03:00.000Z'],
      }),
    ),
    deletedAt: Type.Optional(
      Type.String({
        description: 'when it was deleted for everyone (absent when not); its content is then empty',
        examples: ['2026-01-15T12:05:00.000Z'],
      }),
    ),
  },
  { title: 'StoredMessage' },
);
export type StoredMessageView = Static<typeof StoredMessageView>;

/** `data` of `GET /v1/chats/{jid}/messages`. */
export const HistoryPage = Type.Object(
  {
    messages: Type.Array(StoredMessageView, { description: 'newest first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], {
      description: 'pass as cursor for the next (older) page; null on the last page',
    }),
  },
  { title: 'HistoryPage' },
);

/** The latest message of a chat in the chat list. */
export const LastMessage = Type.Object(
  {
    id: Type.String({ examples: ['3EB0C767D26A1D2E5B3A61'] }),
    fromMe: Type.Boolean(),
    sender: Type.String({ examples: ['5511999990001@s.whatsapp.net'] }),
    kind: Type.String({ examples: ['text'] }),
    text: Type.String({ description: 'text or caption; empty when none', examples: ['See you tomorrow'] }),
    timestamp: Type.String({ examples: ['2026-01-15T12:00:00.000Z'] }),
    state: DeliveryStateName,
  },
  { title: 'LastMessage' },
);

/** One chat of `GET /v1/chats`. */
export const ChatView = Type.Object(
  {
    jid: Type.String({ description: 'chat JID (user or group)', examples: ['5511988887777@s.whatsapp.net'] }),
    isGroup: Type.Boolean(),
    name: Type.String({
      description: "the user's latest display name for a one-to-one chat; empty for groups and when unknown",
      examples: ['Ana'],
    }),
    lastMessage: LastMessage,
    unreadCount: Type.Integer({
      minimum: 0,
      description:
        'messages from others (reactions aside) after the newest one marked read with POST /v1/messages/read ' +
        '(all of them when none was)',
      examples: [2],
    }),
  },
  { title: 'Chat' },
);
export type ChatView = Static<typeof ChatView>;

/** `data` of `GET /v1/chats`. */
export const ChatPage = Type.Object(
  {
    chats: Type.Array(ChatView, { description: 'most recent activity first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], {
      description: 'pass as cursor for the next page; null on the last page',
    }),
  },
  { title: 'ChatPage' },
);

/** The view of a stored message. */
export function storedMessageView(message: StoredMessage | MessageWithStatus): StoredMessageView {
  return {
    id: message.id,
    chat: message.source.chat,
    sender: message.source.sender,
    fromMe: message.source.isFromMe,
    isGroup: message.source.isGroup,
    pushName: message.pushName,
    timestamp: iso(message.timestamp),
    kind: message.content.kind,
    message: messageBody(message.content),
    ...(message.state === undefined ? {} : { state: message.state }),
    ...(message.stateAt === undefined ? {} : { stateAt: message.stateAt }),
    ...('status' in message ? { status: message.status } : {}),
    ...('error' in message && message.error !== undefined ? { error: message.error } : {}),
    ...('sendAt' in message && message.sendAt !== undefined ? { sendAt: iso(message.sendAt) } : {}),
    ...(message.content.editedAt === undefined ? {} : { editedAt: iso(message.content.editedAt) }),
    ...(message.content.deletedAt === undefined ? {} : { deletedAt: iso(message.content.deletedAt) }),
  };
}

/** The view of one chat of the list. */
export function chatView(chat: ChatSummary): ChatView {
  const last = chat.last;
  return {
    jid: chat.jid,
    isGroup: last.source.isGroup,
    name: chat.name,
    lastMessage: {
      id: last.id,
      fromMe: last.source.isFromMe,
      sender: last.source.sender,
      kind: last.content.kind,
      text: last.content.text ?? '',
      timestamp: iso(last.timestamp),
      state: last.state,
    },
    unreadCount: chat.unread,
  };
}
