import type { Clock } from '../domain/clock.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { Jid } from '../domain/messages.ts';
import type { ChatAction, ChatActionsCapability, ChatMessageRef, EngineSession } from '../engines/engine.ts';
import type { SessionManager } from '../sessions/manager.ts';
import { listHistory } from '../store/chats.ts';
import type { Store } from '../store/database.ts';
import { findStoredMessage } from '../store/messages.ts';
import { storedChatJid } from './chats.ts';

/** The names of the chat actions of `POST /v1/chats/{chat}/<action>` (docs/api.md#chats). */
export type ChatActionName = ChatAction['action'];

/**
 * Chat actions and starring (docs/api.md#chats, docs/decisions/0043-chat-actions-and-star.md): archive,
 * pin, mute and mark unread a chat, star and unstar a stored message. The state lives on the platform (synced to
 * the account's devices as app state); parley keeps no copy. Every method needs the instance logged in and
 * connected (@throws DomainError not_logged_in / not_connected / platform_unreachable, as every platform call,
 * docs/decisions/0001-envelope-and-error-codes.md) and passes the engine's errors on.
 */
export class ChatActionService {
  readonly #sessions: SessionManager;
  readonly #store: Store;
  readonly #clock: Clock;

  constructor(deps: { sessions: SessionManager; store: Store; clock: Clock }) {
    this.#sessions = deps.sessions;
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  /**
   * Applies chat action `name` to the chat `{chat}` names (see {@link storedChatJid}); `until` (RFC 3339) only
   * for `mute`. Resolves with the chat JID and, for `mute`, the end of the mute (epoch ms; null: until unmuted).
   * @throws DomainError invalid naming `jid` for a bad chat, `until` when it is not an RFC 3339 time in the future.
   */
  async apply(
    instance: Instance,
    rawChat: string,
    name: ChatActionName,
    until?: string,
  ): Promise<{ chat: Jid; mutedUntil: number | null }> {
    const chat = await storedChatJid(this.#store.db, instance.id, rawChat);
    const end = name === 'mute' && until !== undefined ? this.#futureTime(until) : null;
    const action: ChatAction = name === 'mute' ? { action: 'mute', until: end } : { action: name };
    const capability = chatActions(this.#sessions.ready(instance));
    const [latest] = await listHistory(this.#store.db, instance.id, chat, 1);
    const last: ChatMessageRef[] = latest
      ? [
          {
            id: latest.id,
            fromMe: latest.source.isFromMe,
            timestamp: latest.timestamp,
            ...(latest.source.isGroup && !latest.source.isFromMe
              ? { participant: latest.source.sender }
              : {}),
          },
        ]
      : [];
    await capability.chatAction(chat, action, last);
    return { chat, mutedUntil: end };
  }

  /**
   * Stars or unstars stored message `id` of the instance.
   * @throws DomainError not_found `message not found` when the instance never stored it.
   */
  async star(instance: Instance, id: string, star: boolean): Promise<{ id: string; chat: Jid }> {
    const capability = chatActions(this.#sessions.ready(instance));
    const found = await findStoredMessage(this.#store.db, instance.id, id);
    if (!found) throw errors.notFound('message not found');
    await capability.starMessage(found.source.chat, { id, fromMe: found.source.isFromMe }, star);
    return { id, chat: found.source.chat };
  }

  /**
   * `raw` as epoch ms.
   * @throws DomainError invalid naming `until` unless an RFC 3339 time after now and at most {@link LATEST_UNTIL}
   *   (docs/decisions/0043-chat-actions-and-star.md).
   */
  #futureTime(raw: string): number {
    const at = RFC3339.test(raw) && realDay(raw) ? Date.parse(raw) : Number.NaN;
    if (Number.isNaN(at))
      throw errors.badRequest('until must be an RFC 3339 time (e.g. 2030-01-01T00:00:00Z)');
    if (at <= this.#clock()) throw errors.badRequest('until must be in the future');
    if (at > LATEST_UNTIL)
      throw errors.badRequest(`until must be at most ${new Date(LATEST_UNTIL).toISOString()}`);
    return at;
  }
}

/**
 * The latest end of a mute, epoch ms: 9999-12-31T23:59:59.999Z, the last instant whose UTC form (the answer's
 * `mutedUntil`) is an RFC 3339 time. A later one, given with a negative offset (`9999-12-31T23:59:59-00:01`), is
 * refused before anything is changed (docs/decisions/0043-chat-actions-and-star.md).
 */
const LATEST_UNTIL = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** RFC 3339 date-time: date, `T`, time with optional fraction, and `Z` or an offset. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** Whether the date part (`YYYY-MM-DD`) of `raw` is a real calendar day (`Date.parse` rolls 02-30 over to March). */
function realDay(raw: string): boolean {
  const [year, month, day] = raw.slice(0, 10).split('-').map(Number);
  if (year === undefined || month === undefined || day === undefined) return false;
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** The session's chat actions. @throws DomainError platform_refused when its engine has none. */
function chatActions(session: EngineSession): ChatActionsCapability {
  const { chatAction, starMessage } = session;
  if (!chatAction || !starMessage) {
    throw new DomainError('platform_refused', 'this engine does not manage chat actions');
  }
  return { chatAction: chatAction.bind(session), starMessage: starMessage.bind(session) };
}
