import type { EngineCall } from './calls.ts';
import type { ChatLabelChange, LabelEdit } from './labels.ts';
import type { LidMapping } from './lids.ts';

/**
 * Domain types shared by the engines (sandbox, Baileys) and the parts that subscribe to them
 * (sessions, message store, webhook outbox). Times are Unix epoch milliseconds unless named otherwise.
 */

/** A JID: `<phone>@s.whatsapp.net` for users, `<id>@g.us` for groups (docs/api.md#conventions). */
export type Jid = string;

/** The user and group JID domains (docs/api.md#conventions). */
export const USER_DOMAIN = 's.whatsapp.net';
export const GROUP_DOMAIN = 'g.us';

/**
 * The chat of status updates (stories): a message to this JID is a status, shown to the users its
 * `statusJidList` names (Baileys Socket/messages-send.js relayMessage, `isStatus`;
 * docs/decisions/0044-status-stories.md).
 */
export const STATUS_BROADCAST: Jid = 'status@broadcast';

/** The user JID of a phone number (digits only). */
export function userJid(phone: string): Jid {
  return `${phone}@${USER_DOMAIN}`;
}

/** The phone number of a user JID, dropping any device part (`123.0:4@s.whatsapp.net` → `123`); null otherwise. */
export function phoneOfJid(jid: Jid): string | null {
  const match = /^(\d+)(?:[.:]\d+)*(?::\d+)?@s\.whatsapp\.net$/.exec(jid);
  return match?.[1] ?? null;
}

/** Connection state as an engine reports it (docs/api.md#session; docs/decisions/0016-session-lifecycle.md). */
export interface ConnectionState {
  /** The live connection to the platform is open (or, while pairing, the QR attempt is running). */
  connected: boolean;
  /** Paired credentials exist. */
  loggedIn: boolean;
  /** The account's device-qualified JID once logged in. */
  jid: Jid | null;
  /** The account's phone number once logged in. */
  phone: string | null;
  /** The account's display name, when known. */
  pushName: string | null;
  /** Why the connection last closed or stopped, for the status endpoint and logs (e.g. `replaced by another session`). */
  reason?: string;
  /**
   * Set with `reason` when the platform ended the connection for one of these causes and the engine stopped:
   * `replaced` another client took over the same credentials (stream conflict, close code 440); `restricted` the
   * platform refuses the account (402, 403, or a login refused again and again: blocked or banned). Absent for
   * every other close (docs/decisions/0012-session-and-message-status-events.md).
   */
  cause?: 'replaced' | 'restricted';
}

/**
 * The `status` of a `SessionStatus` event (docs/api.md "Events"): `qr` a pairing attempt shows a QR code;
 * `pairing` the phone accepted the link and the device is completing it; `connected`; `disconnected` (also a
 * drop the engine reconnects from, `reason` says so); `logged_out` (unlinked from the phone or through the API);
 * `replaced` (another session took over); `restricted` (the account is blocked or banned); `paused` / `resumed`
 * (parley's send pacing stopped or restarted sends). Derived in docs/decisions/0012-session-and-message-status-events.md.
 */
export type SessionStatusKind =
  | 'qr'
  | 'pairing'
  | 'connected'
  | 'disconnected'
  | 'logged_out'
  | 'replaced'
  | 'restricted'
  | 'paused'
  | 'resumed';

/** Every {@link SessionStatusKind}, in the order of their documentation (docs/api.md "Events"). */
export const SESSION_STATUS_KINDS: readonly SessionStatusKind[] = [
  'qr',
  'pairing',
  'connected',
  'disconnected',
  'logged_out',
  'replaced',
  'restricted',
  'paused',
  'resumed',
];

/** The final outcome of a send that a `MessageStatus` event reports (docs/api.md "Events"). */
export type MessageStatusKind = 'sent' | 'failed' | 'canceled';

/**
 * The current pairing code (docs/decisions/0016-session-lifecycle.md): the raw string a QR encodes, and when it stops
 * being valid.
 */
export interface PairingCode {
  code: string;
  /** Epoch milliseconds. */
  expiresAt: number;
}

/** Where a message lives and who sent it (docs/api.md#webhook-events: `event.info.messageSource`). */
export interface MessageSource {
  chat: Jid;
  sender: Jid;
  isFromMe: boolean;
  isGroup: boolean;
  /**
   * Set when a JID here is a LID (`…@lid`) that no mapping could turn into a phone JID; it is passed on as is
   * (docs/decisions/0025-live-engine.md: every JID in a payload is a phone JID when it can be resolved).
   */
  lidUnresolved?: true;
}

/** Delivery states of a message, in order (docs/decisions/0017-messages-and-media.md). */
export type DeliveryState = 'sent' | 'delivered' | 'read' | 'played';

/** Bytes of a media message with the MIME type decided from the bytes (docs/decisions/0017-messages-and-media.md). */
export interface MediaPayload {
  data: Buffer;
  mimetype: string;
}

/**
 * What a send carries (docs/decisions/0017-messages-and-media.md). Media arrives already fetched, checked and
 * converted.
 */
export type OutgoingContent =
  /**
   * Text. A status text (sent to {@link STATUS_BROADCAST}) may carry its background colour `backgroundArgb`
   * (0xAARRGGBB as an unsigned 32-bit integer) and `font` (WhatsApp's ExtendedTextMessage.FontType number), the
   * fields Baileys writes into the extendedTextMessage (Utils/messages.js generateWAMessageContent).
   */
  | { kind: 'text'; text: string; linkPreview: boolean; backgroundArgb?: number; font?: number }
  | { kind: 'image'; media: MediaPayload; caption?: string }
  | { kind: 'document'; media: MediaPayload; fileName: string; caption?: string }
  | { kind: 'audio'; media: MediaPayload }
  | { kind: 'video'; media: MediaPayload; caption?: string }
  | { kind: 'sticker'; media: MediaPayload; animated: boolean }
  | { kind: 'location'; latitude: number; longitude: number; name?: string; address?: string }
  | { kind: 'contact'; displayName: string; vcard: string }
  /**
   * A poll (docs/decisions/0026-chats-edits-polls-and-calls.md): `options` are 2–12 unique non-empty names;
   * `selectableCount` 0 lets a voter pick any number of options, 1..options.length at most that many (WhatsApp's
   * pollCreationMessage).
   */
  | { kind: 'poll'; name: string; options: string[]; selectableCount: number };

/** The kinds of message parley knows; `other` for anything else the platform sends. */
export type MessageKind = OutgoingContent['kind'] | 'reaction' | 'other';

/** A message's content as stored and as normalised into webhook payloads (no media bytes). */
export interface MessageContent {
  kind: MessageKind;
  /** Text of a text message, or the caption of a media message. */
  text?: string;
  mimetype?: string;
  fileName?: string;
  /** Size in bytes of a media message. */
  fileLength?: number;
  /** Audio only: true for a voice note (push-to-talk), false for an audio file; absent means a voice note. */
  ptt?: boolean;
  /**
   * Where the engine that reported the message can fetch its media file again: an opaque text only that engine
   * reads (Baileys: the direct path, media key and hashes; the sandbox: its own file id). Absent when parley
   * cannot download the file (media parley sent itself, or a message without media).
   */
  download?: string;
  latitude?: number;
  longitude?: number;
  name?: string;
  address?: string;
  vcard?: string;
  /** Reaction emoji ('' removes) and the id of the message reacted to. */
  reaction?: { emoji: string; targetId: string };
  /** Id of the message this one replies to. */
  quotedId?: string;
  /** Phone JIDs the text or caption mentions (`@<phone>` in the text; WhatsApp's contextInfo.mentionedJid). */
  mentions?: Jid[];
  /**
   * Set when the message arrived or went out forwarded: how many times it has been forwarded, at least 1
   * (WhatsApp's contextInfo.isForwarded and forwardingScore; docs/decisions/0041-forward-calls-channels.md).
   */
  forwardingScore?: number;
  /** A poll's options and how many a voter may pick (0 = any). The poll's question is `text`. */
  poll?: { options: string[]; selectableCount: number };
  /** Set when the sender edited the message: the time of the edit, epoch ms (`text` is the new text). */
  editedAt?: number;
  /** Set when the sender deleted the message for everyone: the time of the deletion, epoch ms. */
  deletedAt?: number;
}

/** A message as engines report it (sent or received). */
export interface EngineMessage {
  id: string;
  source: MessageSource;
  pushName: string;
  /** Epoch milliseconds. */
  timestamp: number;
  content: MessageContent;
}

/** A request to send one message. */
export interface OutgoingMessage {
  to: Jid;
  /**
   * The platform message id to relay under: a send job's id, the same on every attempt, so the platform and the
   * recipient's devices see one message (docs/decisions/0009-sends-as-jobs.md). A new id when absent.
   */
  id?: string;
  content: OutgoingContent;
  /** Message id to quote as a reply (docs/decisions/0017-messages-and-media.md: field `id` on every send). */
  quotedId?: string;
  /**
   * Phone JIDs mentioned in a text or caption; each appears as `@<phone>` in the text
   * (docs/decisions/0026-chats-edits-polls-and-calls.md).
   */
  mentions?: Jid[];
  /**
   * Sends the message marked forwarded with this forwarding score (≥ 1; contextInfo.isForwarded and
   * forwardingScore), for `POST /v1/messages/forward` (docs/decisions/0041-forward-calls-channels.md). Absent: not
   * forwarded.
   */
  forwardingScore?: number;
  /**
   * A status (`to` = {@link STATUS_BROADCAST}): the user JIDs it is shown to, the `statusJidList` Baileys relays it
   * to (Socket/messages-send.js relayMessage; docs/decisions/0044-status-stories.md). Absent for other sends.
   */
  statusJidList?: Jid[];
}

/** A chat presence the account can show in a chat (WhatsApp's `chatstate` and `presence` stanzas). */
export type ChatPresenceState = 'composing' | 'recording' | 'paused' | 'available' | 'unavailable';

/**
 * Someone edited or deleted a message for everyone (docs/decisions/0026-chats-edits-polls-and-calls.md
 * `MessageUpdate`): `messageId` is the changed message, `source.sender` who changed it (phone JID), `text` the new
 * text of an edit.
 */
export interface MessageUpdate {
  kind: 'edit' | 'delete';
  messageId: string;
  source: MessageSource;
  text?: string;
  /** Epoch milliseconds of the change. */
  timestamp: number;
}

/**
 * A vote on a poll (docs/decisions/0026-chats-edits-polls-and-calls.md `PollVote`), decrypted: `source.sender` is the
 * voter, `selectedOptions` the option names now chosen (empty: the voter withdrew their vote; each vote replaces the
 * voter's previous one).
 */
export interface PollVote {
  pollId: string;
  /** The poll's question, when the poll is stored. */
  pollName: string;
  source: MessageSource;
  selectedOptions: string[];
  /** Epoch milliseconds of the vote. */
  timestamp: number;
}

/** What a send returns: the platform's message id (uppercase hex, `3EB0…` style) and its time. */
export interface SentMessage {
  id: string;
  /** Epoch milliseconds. */
  timestamp: number;
}

/** One entry of a registration check (docs/api.md#contacts). */
export interface UserCheck {
  query: string;
  isInPlatform: boolean;
  jid: Jid | null;
  verifiedName: string;
}

/** Profile details of a user (docs/api.md#contacts `/v1/contacts/info`). */
export interface UserInfo {
  query: string;
  jid: Jid | null;
  status: string;
  pictureId: string;
  verifiedName: string;
}

/** A group's picture reference (docs/api.md#contacts `/v1/contacts/avatar`). */
export interface Avatar {
  url: string;
  id: string;
}

/** A contact as known to the account (docs/api.md#contacts). */
export interface Contact {
  jid: Jid;
  businessName: string;
  firstName: string;
  fullName: string;
  pushName: string;
}

/** A group participant (docs/api.md#groups). */
export interface GroupParticipant {
  jid: Jid;
  isAdmin: boolean;
  isSuperAdmin: boolean;
}

/**
 * A group with every field of docs/api.md#groups; times are epoch milliseconds, `disappearingTimer` in seconds (0 =
 * off).
 */
export interface GroupInfo {
  jid: Jid;
  name: string;
  topic: string;
  ownerJid: Jid;
  created: number;
  nameSetAt: number;
  nameSetBy: Jid;
  isAnnounce: boolean;
  isLocked: boolean;
  isEphemeral: boolean;
  disappearingTimer: number;
  participants: GroupParticipant[];
}

/** One chat of a history sync (docs/decisions/0018-webhook-events-and-payloads.md `HistorySync`). */
export interface HistoryChat {
  jid: Jid;
  name: string;
  messages: EngineMessage[];
}

/**
 * Events an engine emits. Engines only translate: the session manager, the message store and the webhook
 * outbox subscribe to these (docs/decisions/0024-engines-and-data-flow.md).
 */
export type EngineEvent =
  | { type: 'connection'; state: ConnectionState }
  | { type: 'message'; message: EngineMessage }
  | {
      type: 'receipt';
      state: Exclude<DeliveryState, 'sent'>;
      messageIds: string[];
      source: MessageSource;
      /** Epoch milliseconds. */
      timestamp: number;
    }
  | { type: 'presence'; source: MessageSource; state: 'composing' | 'paused'; media: '' | 'audio' }
  /**
   * The account marked received messages of `chat` as read (it sent their read receipts): they move to `read`.
   * Recorded by the messaging service after the engine's call; no webhook is sent for it
   * (docs/api.md#webhook-events).
   */
  | { type: 'read'; chat: Jid; messageIds: string[] }
  | { type: 'history'; syncType: string; progress: number; chats: HistoryChat[] }
  | { type: 'contacts'; contacts: Contact[] }
  /**
   * A voice or video call to the account rang, was missed, rejected or answered elsewhere
   * (docs/decisions/0026-chats-edits-polls-and-calls.md).
   */
  | { type: 'call'; call: EngineCall }
  | { type: 'group'; update: GroupUpdate }
  /** A message was edited or deleted for everyone (by the account through the API, or by someone else). */
  | { type: 'messageUpdate'; update: MessageUpdate }
  /** A vote on one of the account's polls, decrypted. */
  | { type: 'pollVote'; vote: PollVote }
  /**
   * The session's status changed (webhook `SessionStatus`): derived from `connection` events by the session
   * manager (src/events/session-status.ts), `paused` / `resumed` recorded by send pacing. `reason` in words;
   * `until` when a pause or restriction ends, epoch ms; `at` when it happened, epoch ms.
   */
  | {
      type: 'sessionStatus';
      status: SessionStatusKind;
      reason?: string;
      until?: number /* epoch ms */;
      at: number /* epoch ms */;
    }
  /**
   * A send reached its final outcome (webhook `MessageStatus`): `sent` (the platform took it), `failed` (with
   * `error`), `canceled`. `id` is the message id the send answered; `at` epoch ms.
   */
  | {
      type: 'messageStatus';
      id: string;
      status: 'sent' | 'failed' | 'canceled';
      error?: string;
      at: number /* epoch ms */;
    }
  /**
   * The platform told the account which phone number is behind one or more LIDs (Baileys' `lid-mapping.update`,
   * a message that carried both forms, the sandbox's simulated users). Recorded into `lid_mappings`, no webhook
   * (docs/decisions/0038-lid-mappings.md).
   */
  | { type: 'lid-mapping'; mappings: LidMapping[] }
  /**
   * A label of the account was created, changed or deleted (Baileys' `labels.edit` from a `label_edit` app state
   * mutation, or the account's own change through the API). Recorded into `labels`, no webhook
   * (docs/decisions/0045-business-labels.md).
   */
  | { type: 'label'; label: LabelEdit }
  /**
   * A chat was labelled or unlabelled (Baileys' `labels.association` from a `label_jid` mutation, or the account's
   * own change). Recorded into `chat_labels`, no webhook (docs/decisions/0045-business-labels.md).
   */
  | { type: 'chat-label'; change: ChatLabelChange };

/**
 * What changed in a group (the platform's `w:gp2` notifications; Baileys' `group-participants.update` and
 * `groups.update`): `join` / `leave` are an add / remove whose only participant is the actor.
 */
export type GroupUpdateAction =
  | 'add'
  | 'remove'
  | 'join'
  | 'leave'
  | 'promote'
  | 'demote'
  | 'subject'
  | 'description'
  | 'announce'
  | 'locked'
  | 'ephemeral';

/**
 * One change of a group made by anyone (the account included). JIDs are phone JIDs when they can be resolved
 * (docs/decisions/0025-live-engine.md). Exactly the field of the action is set: `name` for `subject`, `topic` for
 * `description`, `isAnnounce`, `isLocked`, `disappearingTimer` (seconds, 0 = off) for the settings; `participants` is
 * empty for setting changes.
 */
export interface GroupUpdate {
  groupJid: Jid;
  action: GroupUpdateAction;
  /** Who made the change; null when the platform does not say. */
  actor: Jid | null;
  participants: Jid[];
  /** Epoch milliseconds. */
  timestamp: number;
  name?: string;
  topic?: string;
  isAnnounce?: boolean;
  isLocked?: boolean;
  disappearingTimer?: number;
}

/**
 * What a log line may say about an event (docs/decisions/0023-operations.md: never a body): its type and the message
 * id(s), the chat for receipts and presences, counts for history chunks and contact batches.
 */
export function eventLogFields(event: EngineEvent): Record<string, unknown> {
  switch (event.type) {
    case 'message':
      return { event: event.type, id: event.message.id, chat: event.message.source.chat };
    case 'receipt':
      return { event: event.type, ids: event.messageIds, chat: event.source.chat, state: event.state };
    case 'presence':
      return { event: event.type, chat: event.source.chat };
    case 'read':
      return { event: event.type, ids: event.messageIds, chat: event.chat };
    case 'history':
      return {
        event: event.type,
        syncType: event.syncType,
        chats: event.chats.length,
        messages: event.chats.reduce((n, chat) => n + chat.messages.length, 0),
      };
    case 'contacts':
      return { event: event.type, contacts: event.contacts.length };
    case 'call':
      return { event: event.type, id: event.call.id, status: event.call.status };
    case 'messageUpdate':
      return { event: event.type, id: event.update.messageId, chat: event.update.source.chat };
    case 'pollVote':
      return { event: event.type, id: event.vote.pollId, chat: event.vote.source.chat };
    case 'connection':
      return { event: event.type };
    case 'sessionStatus':
      return { event: event.type, status: event.status };
    case 'messageStatus':
      return { event: event.type, id: event.id, status: event.status };
    case 'group':
      return { event: event.type, chat: event.update.groupJid, action: event.update.action };
    case 'lid-mapping':
      return { event: event.type, mappings: event.mappings.length };
    case 'label':
      return { event: event.type, label: event.label.id, deleted: event.label.deleted };
    case 'chat-label':
      return {
        event: event.type,
        chat: event.change.chat,
        label: event.change.labelId,
        labeled: event.change.labeled,
      };
  }
}
