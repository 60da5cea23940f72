import type { RegistrationCache } from '../contacts/registration-cache.ts';
import { DomainError } from '../domain/errors.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { Jid, OutgoingContent, SentMessage } from '../domain/messages.ts';
import { GROUP_DOMAIN, userJid } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findStoredMessage } from '../store/messages.ts';
import { loadInstance } from './instances.ts';

/** True when a chat address (`phone` field) is a group JID rather than a phone number. */
export function isGroupAddress(address: string): boolean {
  return address.endsWith(`@${GROUP_DOMAIN}`);
}

/** The chat JID of a `phone` field: a phone number's user JID, or the group JID as given. */
export function chatJidOf(address: string): Jid {
  return isGroupAddress(address) ? address : userJid(address);
}

/** A send: the chat address (`phone` field: a phone number or a group JID) and the message to quote, if any. */
export interface SendInput {
  phone: string;
  quotedId?: string | undefined;
  /** Phone numbers the text or caption mentions (each written `@<phone>` in it; checked by the caller). */
  mentions?: readonly string[] | undefined;
}

/** A reaction: the chat address, the target message id (`me:` stripped, `fromMe` set), the emoji ('' removes). */
export interface ReactInput {
  phone: string;
  targetId: string;
  fromMe: boolean;
  emoji: string;
  /** The author of the target message in a group, when the caller named it. */
  senderPhone?: string | undefined;
}

/**
 * The messaging family (docs/api.md#messages, docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0017-messages-and-media.md): sends, reactions and read receipts. Every method needs the instance
 * logged in and connected (@throws DomainError not_logged_in / not_connected,
 * docs/decisions/0001-envelope-and-error-codes.md), and returns only once the resulting event is recorded (the engine
 * awaits the recorder for sends; `markRead` records its own).
 */
export class MessagingService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #registrations: RegistrationCache;
  readonly #recorder: EventRecorder;

  constructor(deps: {
    store: Store;
    sessions: SessionManager;
    registrations: RegistrationCache;
    recorder: EventRecorder;
  }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#registrations = deps.registrations;
    this.#recorder = deps.recorder;
  }

  /** The instance the call addresses, read by id. @throws DomainError not_found `instance not found`. */
  #load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }

  /**
   * The whole send pipeline of docs/decisions/0024-engines-and-data-flow.md for one message: the session (409), the
   * recipient's registration (422), then the content — built only now, so media is fetched only for a send that can
   * go out — then the engine's send, which returns after the message row is recorded.
   * @throws DomainError not_registered `recipient <phone> is not registered on the platform`; content and
   *   engine errors as raised.
   */
  async send(
    instanceId: InstanceId,
    input: SendInput,
    content: () => Promise<OutgoingContent> | OutgoingContent,
  ): Promise<SentMessage> {
    const instance = await this.#load(instanceId);
    const session = this.#sessions.ready(instance);
    await this.#requireRegistered(instance, session, input.phone);
    const built = await content();
    return session.send({
      to: chatJidOf(input.phone),
      content: built,
      ...(input.quotedId === undefined ? {} : { quotedId: input.quotedId }),
      ...(input.mentions?.length ? { mentions: input.mentions.map(userJid) } : {}),
    });
  }

  /**
   * Reacts to a message. In a group, the target's author is the named sender, else the stored message's sender
   * (the platform needs it for others' messages).
   * @throws DomainError not_registered for an unregistered one-to-one recipient; engine errors as raised.
   */
  async react(instanceId: InstanceId, input: ReactInput): Promise<SentMessage> {
    const instance = await this.#load(instanceId);
    const session = this.#sessions.ready(instance);
    await this.#requireRegistered(instance, session, input.phone);
    let author: Jid | undefined;
    if (input.senderPhone !== undefined) author = userJid(input.senderPhone);
    else if (isGroupAddress(input.phone) && !input.fromMe) {
      author = (await findStoredMessage(this.#store.db, instance.id, input.targetId))?.source.sender;
    }
    return session.react(chatJidOf(input.phone), input.targetId, input.fromMe, input.emoji, author);
  }

  /**
   * Sends read receipts for received messages `ids` of chat `chatPhone` (`senderPhone`: their author, required
   * in groups), then records a `read` event so the messages move to `read` through the event pipeline.
   */
  async markRead(
    instanceId: InstanceId,
    input: { chatPhone: string; ids: readonly string[]; senderPhone?: string | undefined },
  ): Promise<void> {
    const instance = await this.#load(instanceId);
    const session = this.#sessions.ready(instance);
    const chat = chatJidOf(input.chatPhone);
    const ids = [...new Set(input.ids)];
    await session.markRead(
      chat,
      ids,
      input.senderPhone === undefined ? undefined : userJid(input.senderPhone),
    );
    await this.#recorder.record(instance.id, { type: 'read', chat, messageIds: ids });
  }

  /**
   * Checks that the recipient of a one-to-one chat is registered on the platform, through the registration cache
   * (docs/decisions/0001-envelope-and-error-codes.md); group chats are checked by the engine (membership).
   */
  async #requireRegistered(instance: Instance, session: EngineSession, address: string): Promise<void> {
    if (isGroupAddress(address)) return;
    const [check] = await this.#registrations.check(instance.id, [address], (phones) =>
      session.checkPhones(phones),
    );
    if (!check?.isInPlatform) {
      throw new DomainError('not_registered', `recipient ${address} is not registered on the platform`);
    }
  }
}
