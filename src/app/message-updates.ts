import type { RegistrationCache } from '../contacts/registration-cache.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { isLidAddress, lidOfJid } from '../domain/lids.ts';
import type { ChatPresenceState, SentMessage } from '../domain/messages.ts';
import { userJid } from '../domain/messages.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findLidMappingByLid } from '../store/lid-mappings.ts';
import { findStoredMessage, type StoredMessage } from '../store/messages.ts';
import { chatJidOf } from './messaging.ts';
import { requireRegistered } from './registration-check.ts';

/**
 * How long after sending a text message WhatsApp lets its sender edit it: 15 minutes, in ms (WhatsApp Help
 * Center "How to edit messages"; phones refuse later edits).
 */
export const EDIT_WINDOW_MS = 15 * 60 * 1000;

/**
 * How long after sending a message parley lets its sender delete it for everyone: 48 hours, in ms. WhatsApp's
 * Help Center says "about 2 days"; parley enforces the lower bound so a deletion it accepts is one the platform
 * applies.
 */
export const DELETE_WINDOW_MS = 48 * 60 * 60 * 1000;

/**
 * Edits, deletions for everyone and chat presence (docs/decisions/0026-chats-edits-polls-and-calls.md). Edits and
 * deletions apply to messages parley stored as sent by the instance, in the named chat; both need the instance logged
 * in and connected (@throws DomainError not_logged_in / not_connected,
 * docs/decisions/0001-envelope-and-error-codes.md) and return once the `messageUpdate` event is recorded.
 */
export class MessageUpdateService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #clock: Clock;
  readonly #registrations: RegistrationCache;

  constructor(deps: {
    store: Store;
    sessions: SessionManager;
    clock: Clock;
    registrations: RegistrationCache;
  }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#clock = deps.clock;
    this.#registrations = deps.registrations;
  }

  /**
   * The stored message `id` of chat `phone`, sent by the instance.
   * @throws DomainError not_found `message <id> not found in this chat`; forbidden `only messages this instance
   *   sent can be <verb>` for someone else's message.
   */
  async #own(instance: Instance, phone: string, id: string, verb: string): Promise<StoredMessage> {
    const message = await findStoredMessage(this.#store.db, instance.id, id);
    if (!message || !(await this.#inChat(instance, message, phone))) {
      throw errors.notFound(`message ${id} not found in this chat`);
    }
    if (!message.source.isFromMe) {
      throw new DomainError('forbidden', `only messages this instance sent can be ${verb}`);
    }
    return message;
  }

  /**
   * Whether `message` belongs to chat `phone`. A `<lid>@lid` chat also matches the phone JID parley keeps for the
   * LID, since a message sent to a known LID is stored under the phone JID (docs/decisions/0038-lid-mappings.md).
   */
  async #inChat(instance: Instance, message: StoredMessage, phone: string): Promise<boolean> {
    if (message.source.chat === chatJidOf(phone)) return true;
    const lid = isLidAddress(phone) ? lidOfJid(phone) : null;
    if (lid === null) return false;
    const pair = await findLidMappingByLid(this.#store.db, instance.id, lid);
    return pair !== undefined && message.source.chat === userJid(pair.phone);
  }

  /**
   * Replaces the text of the instance's own text message `id` in chat `phone` with `body`.
   * @throws see {@link #own}; invalid `only text messages can be edited` (media, polls, …) and `message <id> was
   *   deleted`; conflict `messages can be edited only within 15 minutes of sending` past {@link EDIT_WINDOW_MS}.
   */
  async edit(instance: Instance, input: { phone: string; id: string; body: string }): Promise<SentMessage> {
    const session = this.#sessions.ready(instance);
    const message = await this.#own(instance, input.phone, input.id, 'edited');
    if (message.content.deletedAt !== undefined) throw errors.badRequest(`message ${input.id} was deleted`);
    if (message.content.kind !== 'text') throw errors.badRequest('only text messages can be edited');
    if (this.#clock() - message.timestamp > EDIT_WINDOW_MS) {
      throw errors.conflict('messages can be edited only within 15 minutes of sending');
    }
    return session.edit(message.source.chat, message.id, input.body);
  }

  /**
   * Deletes the instance's own message `id` in chat `phone` for everyone.
   * @throws see {@link #own}; conflict `message <id> was already deleted`, `messages can be deleted for everyone
   *   only within 48 hours of sending` past {@link DELETE_WINDOW_MS}.
   */
  async revoke(instance: Instance, input: { phone: string; id: string }): Promise<SentMessage> {
    const session = this.#sessions.ready(instance);
    const message = await this.#own(instance, input.phone, input.id, 'deleted for everyone');
    if (message.content.deletedAt !== undefined)
      throw errors.conflict(`message ${input.id} was already deleted`);
    if (this.#clock() - message.timestamp > DELETE_WINDOW_MS) {
      throw errors.conflict('messages can be deleted for everyone only within 48 hours of sending');
    }
    return session.revoke(message.source.chat, message.id);
  }

  /**
   * Shows `state` in chat `phone`: composing (typing), recording (a voice note), paused, or the account's
   * availability (available, unavailable). Nothing is recorded. A one-to-one chat's number is checked first, whatever
   * the state, as a send's is (registration-check.ts), so both engines answer an unknown number alike.
   * @throws DomainError not_registered for an unregistered one-to-one chat; engine errors as raised.
   */
  async presence(instance: Instance, input: { phone: string; state: ChatPresenceState }): Promise<void> {
    const session = this.#sessions.ready(instance);
    await requireRegistered(this.#registrations, instance, session, input.phone);
    await session.sendPresence(chatJidOf(input.phone), input.state);
  }
}
