import type { ChatModification } from 'baileys';
import type { Jid } from '../../domain/messages.ts';
import type { ChatAction, ChatMessageRef } from '../engine.ts';
import type { SocketLike } from './socket.ts';

/**
 * Chat actions and starring through Baileys 7 `chatModify` (Socket/chats.js), app state patches built by
 * Utils/chat-utils.js `chatModificationToAppPatch` (docs/decisions/0043-chat-actions-and-star.md). Errors are
 * Baileys' (the caller maps them with `mapPlatformErrors`).
 */

/** WhatsApp's `muteEndTimestamp` for "muted until unmuted". */
export const MUTED_ALWAYS = -1;

/**
 * The Baileys modification of `action`: archive and mark-unread cite `last` (Baileys `lastMessages`, timestamps in
 * seconds, the participant of a group message not sent by the account); mute sends the end as epoch ms
 * ({@link MUTED_ALWAYS} when none), unmute `null`.
 */
export function chatModification(
  chat: Jid,
  action: ChatAction,
  last: readonly ChatMessageRef[],
): ChatModification {
  const lastMessages = last.map((m) => ({
    key: {
      remoteJid: chat,
      id: m.id,
      fromMe: m.fromMe,
      ...(m.participant ? { participant: m.participant } : {}),
    },
    messageTimestamp: Math.floor(m.timestamp / 1000),
  }));
  switch (action.action) {
    case 'archive':
    case 'unarchive':
      return { archive: action.action === 'archive', lastMessages };
    case 'pin':
    case 'unpin':
      return { pin: action.action === 'pin' };
    case 'mute':
      return { mute: action.until ?? MUTED_ALWAYS };
    case 'unmute':
      return { mute: null };
    case 'mark-unread':
      return { markRead: false, lastMessages };
  }
}

/** Applies `action` to chat `chat` (one app state patch). */
export async function applyChatAction(
  sock: SocketLike,
  chat: Jid,
  action: ChatAction,
  last: readonly ChatMessageRef[],
): Promise<void> {
  await sock.chatModify(chatModification(chat, action, last), chat);
}

/** Stars or unstars `message` of chat `chat` (a `star` app state patch). */
export async function starMessage(
  sock: SocketLike,
  chat: Jid,
  message: { id: string; fromMe: boolean },
  star: boolean,
): Promise<void> {
  await sock.chatModify({ star: { messages: [{ id: message.id, fromMe: message.fromMe }], star } }, chat);
}
