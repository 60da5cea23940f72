// The engine events and their log fields live in events.ts; they are re-exported here, where every other domain type
// an engine shares is.
export type { EngineEvent, GroupUpdate, GroupUpdateAction } from './events.ts';
export { eventLogFields } from './events.ts';

/**
 * Domain types shared by the engines (sandbox, Baileys) and the parts that subscribe to them
 * (sessions, message store, webhook outbox). Times are Unix epoch milliseconds unless named otherwise.
 */

/** A JID: `<phone>@s.whatsapp.net` for users, `<id>@g.us` for groups (docs/api.md#conventions). */
export type Jid = string;

/** The domain of user JIDs (`<phone>@s.whatsapp.net`; docs/api.md#conventions). */
export const USER_DOMAIN = 's.whatsapp.net';
/** The domain of group JIDs (`<id>@g.us`); {@link USER_DOMAIN} is the users'. */
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
  /** Audio: a voice note unless `ptt` is false (an audio file: a forward of one, docs/api.md#post-v1messagesforward). */
  | { kind: 'audio'; media: MediaPayload; ptt?: boolean }
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

/**
 * The kinds of message parley knows; `other` for anything else the platform sends. `interactive_reply` is a user's
 * answer to a business's interactive message: a button, list row or template button picked, or a flow completed
 * (docs/decisions/0110-interactive-replies.md).
 */
export type MessageKind = OutgoingContent['kind'] | 'reaction' | 'interactive_reply' | 'other';

/**
 * What a user picked in an interactive message (docs/decisions/0110-interactive-replies.md); the text the user saw
 * and sent (the button's or row's title, the flow's closing text) is the content's `text`, and the interactive
 * message answered its `quotedId`.
 */
export interface InteractiveReply {
  /**
   * What was answered, by the platform message that carries the answer: `buttons` (buttonsResponseMessage),
   * `list` (listResponseMessage), `template` (templateButtonReplyMessage), `flow` (interactiveResponseMessage
   * with a nativeFlowResponseMessage).
   */
  type: 'buttons' | 'list' | 'template' | 'flow';
  /** The id the business gave the picked button or row; '' for a flow (its answer is `flow.paramsJson`). */
  selectedId: string;
  /** `list` only, when the platform carried it: the picked row's description. */
  description?: string;
  /** `template` only, when the platform carried it: the 0-based position of the picked button. */
  selectedIndex?: number;
  /** `flow` only: the flow's name, its answer as the JSON text the platform carries, and the flow's version. */
  flow?: { name: string; paramsJson: string; version: number };
}

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
  /** `interactive_reply` only: what the user picked; the text shown for it is `text`. */
  interactive?: InteractiveReply;
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
  /**
   * Set on a deletion in a group when the engine found its sender an admin of the group (the group's metadata,
   * docs/decisions/0026-chats-edits-polls-and-calls.md): only then may it delete another member's message
   * ({@link updateMayChange}). Not part of any payload.
   */
  byAdmin?: true;
  /**
   * Set on a deletion in a group of another member's message when the engine could not read whether its sender is an
   * admin of the group (no metadata of the group at all: the platform did not answer, or the session stopped first;
   * docs/decisions/0106-unverified-group-deletions.md): it never changes the stored message
   * ({@link isUnverifiedDeletion}), and its event is still made, carrying `unverified: true`.
   */
  unverified?: true;
}

/**
 * Whether `update` may change message `target`, as WhatsApp's apps decide: the message was not deleted for everyone
 * already (a phone shows "This message was deleted" and ignores later edits and deletions), and the update came in
 * the message's chat, from the message's sender — or, for a deletion in a group, from a group admin (`byAdmin`: a
 * phone ignores another member's deletion of a message that member did not send,
 * docs/decisions/0026-chats-edits-polls-and-calls.md). The platform relays a protocolMessage naming any id, from
 * anyone.
 */
export function updateMayChange(target: EngineMessage, update: MessageUpdate): boolean {
  if (target.content.deletedAt !== undefined) return false;
  if (target.source.chat !== update.source.chat) return false;
  if (target.source.sender === update.source.sender) return true;
  return update.kind === 'delete' && target.source.isGroup && update.byAdmin === true;
}

/**
 * Whether `update` is a deletion in a group of message `target` that may not change it ({@link updateMayChange}:
 * another member's, no admin mark) but is reported as unverified (docs/decisions/0106-unverified-group-deletions.md):
 * the engine could not tell whether its sender is an admin (`unverified`), the message is not deleted already and the
 * deletion came in its chat. The message is kept; the deletion's event is made, marked `unverified`, so an integration
 * can judge it. A deletion a phone would ignore for another reason (a message deleted already, another chat) is not.
 */
export function isUnverifiedDeletion(target: EngineMessage, update: MessageUpdate): boolean {
  return (
    update.kind === 'delete' &&
    update.unverified === true &&
    target.source.isGroup &&
    target.content.deletedAt === undefined &&
    target.source.chat === update.source.chat &&
    target.source.sender !== update.source.sender
  );
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
