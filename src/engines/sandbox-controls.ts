import type { GroupChange, ParticipantAction } from '../domain/groups.ts';
import type { ConnectionState, GroupInfo, Jid, SentMessage } from '../domain/messages.ts';

// The sandbox engine's test helpers (src/engines/engine.ts `SessionLifecycle.sandbox`) and their inputs.

/** The sandbox's test helpers (docs/decisions/0004-sandbox.md); routes under `/v1/sandbox/*` call these. */
export interface SandboxControls {
  /** The owner scans the current QR: logs in as `phone` (generated when omitted). */
  scan(input: { code?: string; phone?: string }): Promise<ConnectionState>;
  /**
   * A message arrives from user `phone` (in group `groupJid` when given) → `message` event
   * (docs/decisions/0004-sandbox.md).
   * @throws DomainError conflict before login or while disconnected; not_found `group not found` when the account
   *   is not in the group; not_registered when the sender is not registered or not in the group.
   */
  inbound(input: SandboxInboundInput): Promise<SentMessage>;
  /**
   * User `phone` sends a media file to the account (in group `groupJid` when given) → `message` event whose
   * content can be downloaded again (`download`) while the simulated platform keeps the file.
   * @throws as {@link SandboxControls.inbound}.
   */
  inboundMedia(input: SandboxInboundMediaInput): Promise<SentMessage>;
  /**
   * The recipient of sent message `id` acknowledges it → `receipt` event (docs/decisions/0004-sandbox.md,
   * docs/decisions/0018-webhook-events-and-payloads.md).
   * @throws DomainError not_found `message not found` when `id` is not a stored message the account sent.
   */
  receipt(input: SandboxReceiptInput): Promise<void>;
  /** User `phone` starts or stops typing/recording → `presence` event (`recording` = composing + media `audio`). */
  presence(input: SandboxPresenceInput): Promise<void>;
  /**
   * Defines (replaces) a platform user of this instance's simulated world (docs/decisions/0004-sandbox.md);
   * persisted.
   */
  defineUser(input: SandboxUserInput): Promise<void>;
  /**
   * A group created by user `ownerPhone` that includes the account as a plain member
   * (docs/decisions/0004-sandbox.md); persisted.
   * @throws DomainError not_registered when the owner or a participant is not registered.
   */
  createForeignGroup(input: SandboxForeignGroupInput): Promise<GroupInfo>;
  /**
   * User `phone` calls the account → `call` event `offer`; then, with the instance's automatic reject on, a
   * `rejected` event and the reject message sent to the caller, else a `missed` event (nobody answers a
   * simulated call), or, with `ring`, status `ringing` after the offer. Resolves once every event is recorded, with
   * the call id and the status the call is in. A user the account blocked reaches it with none of these: no event,
   * no reject message, status `missed` (docs/decisions/0039-profile-privacy-blocklist.md).
   * @throws DomainError invalid when `phone` is the account; not_registered when the caller is not registered.
   */
  call(input: SandboxCallInput): Promise<{ id: string; status: 'missed' | 'rejected' | 'ringing' }>;
  /**
   * A simulated member `phone` changes a group the account is in (participants or settings) → `group` events,
   * as the platform's notifications would (docs/decisions/0004-sandbox.md). @throws DomainError not_found when the
   *   account is not in the group; not_participant when `phone` is not a member (except for `join`); forbidden when
   *   `phone` may not make the change.
   */
  groupChange(input: SandboxGroupChangeInput): Promise<GroupInfo>;
  /**
   * User `phone` edits (`body` given) or deletes for everyone (`body` omitted) message `id` they sent to the
   * account → `messageUpdate` event. @throws DomainError not_found `message not found` when `id` is not a stored
   * message from that user; invalid when an edit targets a non-text message.
   */
  updateMessage(input: SandboxUpdateInput): Promise<void>;
  /**
   * User `phone` votes `options` (names; [] withdraws) on poll `id` the account sent → `pollVote` event.
   * @throws DomainError not_found `poll not found`; invalid for an unknown option or more than the poll allows.
   */
  vote(input: SandboxVoteInput): Promise<void>;
}

/**
 * Input of {@link SandboxControls.call}: the caller and whether it is a video call (default voice). With `ring` the
 * call keeps ringing (status `ringing`, no `missed` event) until `rejectCall` declines it, unless the instance rejects
 * calls automatically (docs/decisions/0041-forward-calls-channels.md).
 */
export interface SandboxCallInput {
  phone: string;
  video?: boolean;
  ring?: boolean;
}

/**
 * Input of {@link SandboxControls.groupChange}: `phone` is the acting member. With `action`, `participants`
 * (phones) are added, removed, promoted or demoted; `leave` and `join` act on `phone` itself. Otherwise the
 * {@link GroupChange} fields are applied.
 */
export interface SandboxGroupChangeInput extends GroupChange {
  groupJid: Jid;
  phone: string;
  action?: ParticipantAction | 'leave' | 'join';
  participants?: readonly string[];
}

/** Input of {@link SandboxControls.updateMessage}: an edit when `body` is given, else a deletion. */
export interface SandboxUpdateInput {
  phone: string;
  id: string;
  body?: string;
}

/** Input of {@link SandboxControls.vote}: option names of the poll. */
export interface SandboxVoteInput {
  phone: string;
  id: string;
  options: readonly string[];
}

/** Input of {@link SandboxControls.inbound}: sender phone, text, optional group JID and display name. */
export interface SandboxInboundInput {
  phone: string;
  body: string;
  groupJid?: Jid;
  pushName?: string;
}

/** The kinds of media file a simulated user can send. */
export type SandboxMediaKind = 'image' | 'video' | 'audio' | 'document' | 'sticker';

/**
 * Input of {@link SandboxControls.inboundMedia}: sender phone, the file and its declared MIME type, and the
 * fields of its kind (`caption` not for audio and stickers, `fileName` for documents, `ptt` for audio).
 */
export interface SandboxInboundMediaInput {
  phone: string;
  kind: SandboxMediaKind;
  data: Buffer;
  mimetype: string;
  caption?: string;
  fileName?: string;
  ptt?: boolean;
  groupJid?: Jid;
  pushName?: string;
}

/** Input of {@link SandboxControls.receipt}; `phone` picks the acknowledging member in a group chat. */
export interface SandboxReceiptInput {
  id: string;
  state: 'delivered' | 'read' | 'played';
  phone?: string;
}

/** Input of {@link SandboxControls.presence} (docs/decisions/0004-sandbox.md). */
export interface SandboxPresenceInput {
  phone: string;
  state: 'composing' | 'recording' | 'paused';
  groupJid?: Jid;
}

/**
 * Input of {@link SandboxControls.defineUser}: omitted fields take the default world's values
 * (docs/decisions/0004-sandbox.md).
 */
export interface SandboxUserInput {
  phone: string;
  registered?: boolean;
  pushName?: string;
  firstName?: string;
  fullName?: string;
  businessName?: string;
  verifiedName?: string;
}

/** Input of {@link SandboxControls.createForeignGroup}: participants are phone numbers. */
export interface SandboxForeignGroupInput {
  name: string;
  ownerPhone: string;
  participants: readonly string[];
}
