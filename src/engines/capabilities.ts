import type { EngineCall } from '../domain/calls.ts';
import type { Channel, ChannelRef } from '../domain/channels.ts';
import type { Label, LabelEdit } from '../domain/labels.ts';
import type { LidMapping } from '../domain/lids.ts';
import type { EngineMessage, Jid } from '../domain/messages.ts';
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../domain/profile.ts';

// The optional capabilities of an engine session (src/engines/engine.ts `EngineSession`): a test fake need not
// model them, both engines have them. Each call needs the session logged in and connected unless it says otherwise.

/** Options of {@link MediaCapability.downloadMedia}. */
export interface MediaDownloadOptions {
  /**
   * Called with the message content's new `download` reference when the sender's phone uploaded an expired file
   * again (docs/decisions/0046-media-re-upload.md), before the file is fetched from its new place; the caller
   * stores it so later downloads use it. A rejection ends the download with that error.
   */
  onMoved?(download: string): Promise<void>;
}

/** Fetching the files of media messages again from the platform (`GET /v1/messages/{id}/media`). */
export interface MediaCapability {
  /**
   * The decrypted bytes of media message `message`, fetched from the platform by its content's `download`
   * reference (which this engine wrote). Works whether or not the session is connected while the platform's link
   * is valid; once it expired, the sender's phone is asked to upload the file again, which needs the connection
   * (docs/decisions/0046-media-re-upload.md). The iterable checks the file's integrity as it goes and throws at
   * the end when a check fails.
   * @param maxBytes the largest file the caller accepts; a larger one is refused before or while reading.
   * @throws DomainError gone when the platform no longer has the file and the sender's phone could not upload it
   *   again (the reason in the message); not_connected / not_logged_in / platform_unreachable when the link
   *   expired and the phone cannot be asked now; too_large over `maxBytes`; platform_unreachable when the media
   *   host cannot be reached or answers a 5xx (a transient fault of the host); platform_refused when it answers
   *   another error or the file fails its integrity checks; not_found when the message has no reference.
   */
  downloadMedia(
    message: EngineMessage,
    maxBytes: number,
    options?: MediaDownloadOptions,
  ): Promise<AsyncIterable<Buffer>>;
}

/**
 * Channels (newsletters) the account follows (docs/decisions/0041-forward-calls-channels.md). Every call needs the
 * session logged in and connected.
 */
export interface ChannelsCapability {
  /** Every channel the account follows, as the platform lists them. */
  listChannels(): Promise<Channel[]>;
  /**
   * The account follows channel `ref` (idempotent); resolves with the channel as the platform describes it.
   * @throws DomainError not_found `channel not found` when no channel has that JID or invite code.
   */
  followChannel(ref: ChannelRef): Promise<Channel>;
  /**
   * The account stops following channel `ref` (idempotent). @throws DomainError not_found `channel not found`.
   */
  unfollowChannel(ref: ChannelRef): Promise<Channel>;
}

/**
 * Answering calls to the account (docs/decisions/0041-forward-calls-channels.md). The engine remembers the calls of
 * its session in memory (the platform gives no list of ringing calls), so a call that rang before a restart of
 * parley is unknown.
 */
export interface CallsCapability {
  /**
   * Declines ringing call `id` (Baileys `rejectCall`: a `<call><reject call-id call-creator/></call>` stanza) and
   * records its `call` event `rejected`; resolves with that event's call.
   * @throws DomainError not_found `call <id> not found` when the session never saw the call (or forgot it);
   *   conflict `call <id> is no longer ringing (<status>)` once it was missed, rejected or accepted;
   *   not_logged_in / not_connected as every platform operation.
   */
  rejectCall(id: string): Promise<EngineCall>;
}

/**
 * Asking the platform which phone number is behind a LID, or which LID a phone number has
 * (docs/decisions/0038-lid-mappings.md): `GET /v1/contacts/lid` asks it when the store has no pair.
 */
export interface LidCapability {
  /**
   * The pair of LID `lid` or phone number `phone` (digits only, no domain), as far as the platform or the engine's
   * own mapping store knows it; null when unknown. A pair found is also emitted as a `lid-mapping` event.
   * @throws DomainError not_logged_in / not_connected when the session cannot ask; platform errors as raised.
   */
  lidMapping(query: { lid: string } | { phone: string }): Promise<LidMapping | null>;
}

/**
 * The account's own profile, privacy settings and blocklist (docs/api.md#profile,
 * docs/decisions/0039-profile-privacy-blocklist.md). Optional so a test fake need not model it; both engines have
 * it. Every call needs the session logged in and connected; platform errors are `platform_refused`.
 */
export interface AccountCapability {
  /** The account's push name, about text and picture URL as the platform holds them. */
  profile(): Promise<AccountProfile>;
  /** Applies the given changes (name, then about, then picture) and resolves with the profile read back. */
  updateProfile(change: ProfileChange): Promise<AccountProfile>;
  /** The account's privacy settings as the platform holds them. */
  privacy(): Promise<PrivacySettings>;
  /** Changes the given settings (one platform call each) and resolves with the settings read back. */
  updatePrivacy(change: PrivacyChange): Promise<PrivacySettings>;
  /** The phone numbers the account blocked, ascending. */
  blocklist(): Promise<string[]>;
  /**
   * Blocks (`block`) or unblocks (`unblock`) the user `phone`; resolves with the blocklist afterwards. Idempotent.
   * @throws DomainError not_registered when `phone` is not on the platform; invalid when it is the account itself.
   */
  setBlocked(phone: string, action: 'block' | 'unblock'): Promise<string[]>;
}

/**
 * A stored message a chat action cites (Baileys `lastMessages`, Utils/chat-utils.js `getMessageRange`): the
 * platform checks an archive or mark-unread against the chat's latest message. `timestamp` is epoch ms;
 * `participant` is the sender of a group message not sent by the account.
 */
export interface ChatMessageRef {
  id: string;
  fromMe: boolean;
  timestamp: number;
  participant?: Jid;
}

/**
 * One chat action (docs/decisions/0043-chat-actions-and-star.md). `mute` carries `until`, epoch ms, or null for
 * muted until unmuted.
 */
export type ChatAction =
  | { action: 'archive' | 'unarchive' | 'pin' | 'unpin' | 'unmute' | 'mark-unread' }
  | { action: 'mute'; until: number | null };

/**
 * Chat actions and starring (docs/api.md#chats, docs/decisions/0043-chat-actions-and-star.md): the
 * account's own chat state (archived, pinned, muted, marked unread, starred messages), kept by the platform and
 * synced to the account's devices as app state. Optional so a test fake need not model it; both engines have it.
 * Every call needs the session logged in and connected; platform errors are `platform_refused`.
 */
export interface ChatActionsCapability {
  /** Applies `action` to chat `chat`; `last` is the chat's latest stored message, if any (empty otherwise). */
  chatAction(chat: Jid, action: ChatAction, last: readonly ChatMessageRef[]): Promise<void>;
  /** Stars (`star` true) or unstars message `message` of chat `chat`. Idempotent. */
  starMessage(chat: Jid, message: { id: string; fromMe: boolean }, star: boolean): Promise<void>;
}

/**
 * Business labels (docs/api.md#labels, docs/decisions/0045-business-labels.md): the account's labels and the labels
 * of its chats, app state the platform syncs to the account's devices. Optional so a test fake need not model it;
 * both engines have it. Every call needs the session logged in and connected (not_logged_in / not_connected);
 * platform errors are `platform_refused`. Each change is also emitted as a `label` or `chat-label` event, recorded
 * before the call resolves, so parley's store (what `GET /v1/labels` answers) holds it.
 */
export interface LabelsCapability {
  /**
   * Whether the account is a WhatsApp Business account (labels are a business feature). The live engine asks the
   * platform for the account's business profile once per session; the sandbox reads its world.
   */
  isBusiness(): Promise<boolean>;
  /** Creates, renames, recolours (`deleted` false) or deletes (`deleted` true) label `edit.id`. */
  editLabel(edit: LabelEdit): Promise<void>;
  /** Puts label `label` on chat `chat` (`labeled` true) or takes it off. Idempotent. */
  labelChat(chat: Jid, label: Label, labeled: boolean): Promise<void>;
  /**
   * Makes sure every label the account has is recorded in the store, before a new label's id is picked from them
   * (docs/decisions/0045-business-labels.md). The live engine syncs the account's whole label set from the
   * platform once per socket (it learns only changes otherwise); absent on an engine that records every label it
   * holds (the sandbox). @throws DomainError platform_unreachable when the session cannot sync app state.
   */
  syncLabels?(): Promise<void>;
}
