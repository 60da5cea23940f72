import type { BaileysEventMap, ChatModification } from 'baileys';
import { DomainError } from '../../domain/errors.ts';
import type { ChatLabelChange, LabelEdit } from '../../domain/labels.ts';
import type { Jid } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import { mapPlatformErrors } from './errors.ts';
import type { JidResolver } from './jid.ts';
import type { SocketLike } from './socket.ts';

/**
 * Business labels through Baileys 7 (docs/decisions/0045-business-labels.md): changes go out as `chatModify` app
 * state patches (Socket/chats.js `addLabel`, `addChatLabel`, `removeChatLabel`; Utils/chat-utils.js
 * `chatModificationToAppPatch` builds a `label_edit` or `label_jid` mutation of the `regular` collection), and the
 * labels the account's other devices set arrive as Baileys' `labels.edit` and `labels.association` events (from
 * `processSyncAction`), turned into `label` and `chat-label` events here. Errors are Baileys' (the caller maps them
 * with `mapPlatformErrors`).
 */

/** The Baileys modification that creates, changes or deletes label `edit.id` (`addLabel`, a `label_edit` patch). */
export function labelEditModification(edit: LabelEdit): ChatModification {
  return {
    addLabel: {
      id: edit.id,
      name: edit.name,
      color: edit.color,
      deleted: edit.deleted,
      ...(edit.predefinedId === null ? {} : { predefinedId: Number(edit.predefinedId) }),
    },
  };
}

/** The Baileys modification that puts label `labelId` on a chat or takes it off (a `label_jid` patch). */
export function chatLabelModification(labelId: string, labeled: boolean): ChatModification {
  return labeled ? { addChatLabel: { labelId } } : { removeChatLabel: { labelId } };
}

/**
 * Sends label change `edit` (one app state patch). `ownJid` is passed as the patch's chat, which a `label_edit`
 * index does not use (Baileys `addLabel(jid, labels)`).
 */
export async function editLabel(sock: SocketLike, ownJid: Jid, edit: LabelEdit): Promise<void> {
  await sock.chatModify(labelEditModification(edit), ownJid);
}

/** Puts label `labelId` on chat `chat` or takes it off (one app state patch). */
export async function labelChat(
  sock: SocketLike,
  chat: Jid,
  labelId: string,
  labeled: boolean,
): Promise<void> {
  await sock.chatModify(chatLabelModification(labelId, labeled), chat);
}

/**
 * Whether `phone`'s account is a business account: the platform answers a business profile for it (Baileys
 * `getBusinessProfile`, a `w:biz` `business_profile` query), none (or 404 item-not-found) for a personal account.
 * @throws DomainError for any other failure (mapped by `mapPlatformErrors`).
 */
export async function isBusinessAccount(sock: SocketLike, phone: string, now: number): Promise<boolean> {
  try {
    return (await mapPlatformErrors(() => sock.getBusinessProfile(userJid(phone)), { now })) !== undefined;
  } catch (error) {
    if (error instanceof DomainError && error.code === 'platform_refused' && /\(404 /.test(error.message))
      return false;
    throw error;
  }
}

/**
 * The answer of {@link isBusinessAccount} for the current socket: asked once per socket (an account does not turn
 * business while it stays linked; a new socket asks again).
 */
export class BusinessCheck {
  #asked: { sock: SocketLike; value: boolean } | undefined;

  /** Whether `phone`'s account is a business account, asking `sock` unless it was asked already. */
  async ask(sock: SocketLike, phone: string, now: number): Promise<boolean> {
    if (this.#asked?.sock !== sock) this.#asked = { sock, value: await isBusinessAccount(sock, phone, now) };
    return this.#asked.value;
  }
}

/**
 * The `label` event of a Baileys `labels.edit` (a `label_edit` mutation: Utils/chat-utils.js `processSyncAction`);
 * null when it names no label id. A missing name is '' and a missing colour 0, as the platform's phones show them.
 */
export function labelEventOf(
  label: BaileysEventMap['labels.edit'],
): { type: 'label'; label: LabelEdit } | null {
  if (!label.id) return null;
  return {
    type: 'label',
    label: {
      id: String(label.id),
      name: label.name ?? '',
      color: Number(label.color ?? 0),
      predefinedId: label.predefinedId ? String(label.predefinedId) : null,
      deleted: label.deleted === true,
    },
  };
}

/**
 * The `chat-label` event of a Baileys `labels.association` (a `label_jid` mutation); null for a message label
 * (`label_message`, not modelled) or an association without chat or label. A chat named by LID is resolved to the
 * phone JID when the resolver knows it, as messages are (docs/decisions/0038-lid-mappings.md).
 */
export async function chatLabelEventOf(
  update: BaileysEventMap['labels.association'],
  resolver: JidResolver,
): Promise<{ type: 'chat-label'; change: ChatLabelChange } | null> {
  const { association } = update;
  if (association.type !== 'label_jid' || !association.chatId || !association.labelId) return null;
  const { jid } = await resolver.resolve(association.chatId);
  return {
    type: 'chat-label',
    change: { chat: jid, labelId: String(association.labelId), labeled: update.type === 'add' },
  };
}
