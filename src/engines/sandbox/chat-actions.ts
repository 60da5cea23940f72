import type { Jid } from '../../domain/messages.ts';
import type { ChatAction } from '../engine.ts';
import { ACCOUNT_CATEGORY, changeSerially, type SandboxAccount } from './account.ts';
import { sandboxChatKey } from './lids.ts';

/**
 * The account's chat state on the simulated platform (docs/decisions/0043-chat-actions-and-star.md): per chat
 * archived, pinned, muted until and marked unread, and the starred messages. Kept in the session's auth port
 * (category `sandbox-account`, ids `chats:<phone>` and `starred:<phone>`) beside the profile (profile.ts), so it
 * survives restarts and a logout, as the platform keeps it for the account. A user's chat is kept under its phone
 * JID whether an action names it by that or by the user's LID.
 */

const CATEGORY = ACCOUNT_CATEGORY;

/**
 * One chat's state: `mutedUntil` is epoch ms, -1 for muted until unmuted, null when not muted (the platform's
 * `muteEndTimestamp`, WhatsApp's -1 meaning "always").
 */
export interface SandboxChatState {
  archived: boolean;
  pinned: boolean;
  mutedUntil: number | null;
  markedUnread: boolean;
}

/** The account's chat state: chats by JID (only those ever acted on) and the ids of starred messages, ascending. */
export interface SandboxChatsState {
  chats: Record<Jid, SandboxChatState>;
  starred: string[];
}

const BLANK: SandboxChatState = { archived: false, pinned: false, mutedUntil: null, markedUnread: false };

async function read<T>(account: SandboxAccount, id: string, fallback: T): Promise<T> {
  const value = (await account.context.auth.get(CATEGORY, [id])).get(id);
  return value === undefined ? fallback : (JSON.parse(value) as T);
}

async function write(account: SandboxAccount, id: string, value: unknown): Promise<void> {
  await account.context.auth.set([{ category: CATEGORY, id, value: JSON.stringify(value) }]);
}

/** The account's chat state (empty for an account that never acted on a chat). */
export async function chatsState(account: SandboxAccount): Promise<SandboxChatsState> {
  const { phone } = await account.ready();
  return {
    chats: await read<Record<Jid, SandboxChatState>>(account, `chats:${phone}`, {}),
    starred: await read<string[]>(account, `starred:${phone}`, []),
  };
}

/**
 * Applies `action` to chat `chat`: archiving unpins, as on the platform's phones. A user's chat is kept under its
 * phone JID, named by it or by the user's `<lid>@lid` (lids.ts `sandboxChatKey`): one chat, one state.
 */
export function applyChatAction(account: SandboxAccount, chat: Jid, action: ChatAction): Promise<void> {
  return changeSerially(account, () => changeChat(account, chat, action));
}

async function changeChat(account: SandboxAccount, chat: Jid, action: ChatAction): Promise<void> {
  const { phone } = await account.ready();
  const chats = await read<Record<Jid, SandboxChatState>>(account, `chats:${phone}`, {});
  const key = sandboxChatKey(chat);
  const state = { ...BLANK, ...chats[key] };
  switch (action.action) {
    case 'archive':
      state.archived = true;
      state.pinned = false;
      break;
    case 'unarchive':
      state.archived = false;
      break;
    case 'pin':
      state.pinned = true;
      break;
    case 'unpin':
      state.pinned = false;
      break;
    case 'mute':
      state.mutedUntil = action.until ?? -1;
      break;
    case 'unmute':
      state.mutedUntil = null;
      break;
    case 'mark-unread':
      state.markedUnread = true;
      break;
  }
  chats[key] = state;
  await write(account, `chats:${phone}`, chats);
}

/** Stars (`star` true) or unstars message `id`. Idempotent. */
export function starMessage(account: SandboxAccount, id: string, star: boolean): Promise<void> {
  return changeSerially(account, () => changeStar(account, id, star));
}

async function changeStar(account: SandboxAccount, id: string, star: boolean): Promise<void> {
  const { phone } = await account.ready();
  const starred = new Set(await read<string[]>(account, `starred:${phone}`, []));
  if (star) starred.add(id);
  else starred.delete(id);
  await write(account, `starred:${phone}`, [...starred].sort());
}
