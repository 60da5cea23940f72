import type { BaileysEventMap, ChatModification, WASocket } from 'baileys';
import { DomainError } from '../../domain/errors.ts';
import {
  type ChatLabelChange,
  LABEL_CHAT_MAX,
  LABEL_COLORS,
  LABEL_ID,
  LABEL_NAME_STORED_MAX,
  type LabelEdit,
} from '../../domain/labels.ts';
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
 * `raw` as parley stores a synced label name: NUL characters removed (PostgreSQL text cannot hold them) and cut to
 * {@link LABEL_NAME_STORED_MAX} characters (the column's length), so one odd name cannot fail the recorder's
 * transaction and the batch of events with it.
 */
export function storedLabelName(raw: string): string {
  const name = raw.replaceAll('\u0000', '');
  const chars = [...name];
  return chars.length > LABEL_NAME_STORED_MAX ? chars.slice(0, LABEL_NAME_STORED_MAX).join('') : name;
}

/**
 * The `label` event of a Baileys `labels.edit` (a `label_edit` mutation: Utils/chat-utils.js `processSyncAction`);
 * null when its id is not a label id ({@link LABEL_ID}: 1 to 20 digits, what the store's varchar(32) column and
 * parley's routes take). A missing name is '' and a missing colour 0, as the platform's phones show them; the name
 * is stored as {@link storedLabelName} makes it; a colour that is not an integer 0 to 19 is 0; a predefined id that
 * is not 1 to 20 digits is null.
 */
export function labelEventOf(
  label: BaileysEventMap['labels.edit'],
): { type: 'label'; label: LabelEdit } | null {
  const id = label.id === undefined || label.id === null ? '' : String(label.id);
  if (!LABEL_ID.test(id)) return null;
  const color = Number(label.color ?? 0);
  const predefined =
    label.predefinedId === undefined || label.predefinedId === null ? '' : String(label.predefinedId);
  return {
    type: 'label',
    label: {
      id,
      name: storedLabelName(typeof label.name === 'string' ? label.name : ''),
      color: Number.isInteger(color) && color >= 0 && color < LABEL_COLORS ? color : 0,
      predefinedId: LABEL_ID.test(predefined) && predefined !== '0' ? predefined : null,
      deleted: label.deleted === true,
    },
  };
}

/**
 * The `chat-label` event of a Baileys `labels.association` (a `label_jid` mutation); null for a message label
 * (`label_message`, not modelled), an association without chat or label, a label id that is not 1 to 20 digits or a
 * chat JID longer than {@link LABEL_CHAT_MAX} (what the store's columns hold). A chat named by LID is resolved to the
 * phone JID when the resolver knows it, as messages are (docs/decisions/0038-lid-mappings.md).
 */
export async function chatLabelEventOf(
  update: BaileysEventMap['labels.association'],
  resolver: JidResolver,
): Promise<{ type: 'chat-label'; change: ChatLabelChange } | null> {
  const { association } = update;
  if (association.type !== 'label_jid' || !association.chatId || !association.labelId) return null;
  const labelId = String(association.labelId);
  if (!LABEL_ID.test(labelId)) return null;
  const { jid } = await resolver.resolve(association.chatId);
  if (jid.length > LABEL_CHAT_MAX) return null;
  return {
    type: 'chat-label',
    change: { chat: jid, labelId, labeled: update.type === 'add' },
  };
}

/**
 * The parts of a Baileys socket the full label sync uses (Socket/chats.js `resyncAppState`, the socket's
 * `authState`); optional, as a test's fake socket has none.
 */
export type LabelSyncSocket = SocketLike & Partial<Pick<WASocket, 'resyncAppState' | 'authState'>>;

/**
 * Syncs the account's whole `regular` app state collection (which holds the labels) from the platform, so every
 * label the account has arrives as a `labels.edit` event, and resolves once `recorded()` resolves (it waits for the
 * session's queue of platform events, so the labels are in the store). Baileys syncs app state in full only at an
 * account's first connection and otherwise asks only for the patches after the version it stored
 * (Socket/chats.js `resyncAppState`: no stored `app-state-sync-version` of the collection → `return_snapshot`);
 * so the stored version of `regular` is cleared first (inside Baileys' key transaction for the account, the one
 * `resyncAppState` takes, so no sync in progress interleaves), then `resyncAppState(['regular'], true)` fetches
 * the snapshot and Baileys' event buffer is flushed (it would release the events 100 ms later on its own).
 * Resolves true when a version of the collection was stored again (the sync brought it), false when none was: the
 * platform holds nothing in the collection (no labels), or Baileys gave the collection up (it does not throw then:
 * a missing app state key, which also stops the label change that follows, or a patch it could not decode).
 * @throws DomainError platform_unreachable when the socket cannot sync app state; Baileys' errors otherwise.
 */
export async function syncAllLabels(sock: LabelSyncSocket, recorded: () => Promise<void>): Promise<boolean> {
  const { resyncAppState, authState } = sock;
  if (!resyncAppState || !authState)
    throw new DomainError('platform_unreachable', 'this socket cannot sync labels');
  const { keys } = authState;
  await keys.transaction(async () => {
    await keys.set({ 'app-state-sync-version': { regular: null } });
  }, authState.creds.me?.id || 'resync-app-state');
  await resyncAppState(['regular'], true);
  const ev = sock.ev as { flush?: unknown };
  if (typeof ev.flush === 'function') ev.flush();
  await recorded();
  const { regular } = await keys.get('app-state-sync-version', ['regular']);
  return regular !== undefined && regular !== null;
}

/**
 * Runs {@link syncAllLabels} once per socket: once a sync stored the collection's version, later label creations on
 * the same socket do not sync again (the socket records every change the platform syncs while it stays connected).
 * A sync that failed, or brought no version (an empty collection), is tried again on the next call.
 */
export class LabelSync {
  #synced: SocketLike | undefined;

  /** Syncs `sock`'s labels unless they were synced on it already. */
  async ensure(sock: LabelSyncSocket, recorded: () => Promise<void>): Promise<void> {
    if (this.#synced === sock) return;
    if (await syncAllLabels(sock, recorded)) this.#synced = sock;
  }
}
