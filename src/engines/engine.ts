import type { FastifyBaseLogger } from 'fastify';
import type { CallSettings, EngineCall } from '../domain/calls.ts';
import type { Channel, ChannelRef } from '../domain/channels.ts';
import type { Clock } from '../domain/clock.ts';
import type { Environment } from '../domain/environment.ts';
import type { GroupChange, ParticipantAction, ParticipantOutcome } from '../domain/groups.ts';
import type { Label, LabelEdit } from '../domain/labels.ts';
import type { LidMapping } from '../domain/lids.ts';
import type {
  Avatar,
  ChatPresenceState,
  ConnectionState,
  Contact,
  EngineEvent,
  EngineMessage,
  GroupInfo,
  Jid,
  OutgoingMessage,
  PairingCode,
  SentMessage,
  UserCheck,
  UserInfo,
} from '../domain/messages.ts';
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../domain/profile.ts';

/**
 * Per-instance persistence port handed to an engine for its credentials and platform-side state
 * (docs/decisions/0024-engines-and-data-flow.md: engines never touch tables themselves). Values are JSON-serialisable
 * text chosen by the engine; they are sealed with the master key at rest (docs/decisions/0020-security-promises.md).
 */
export interface AuthStateStore {
  /** Reads the values of `ids` in `category`; missing ids are absent from the result. */
  get(category: string, ids: readonly string[]): Promise<Map<string, string>>;
  /** Writes (value string) or deletes (null) many entries in one transaction. */
  set(entries: readonly { category: string; id: string; value: string | null }[]): Promise<void>;
  /** Every entry of one category (for small categories such as a sandbox's users). */
  list(category: string): Promise<Map<string, string>>;
  /** Deletes every entry of the instance (logout). */
  clear(): Promise<void>;
}

/** Result of {@link SessionLock.acquire}: taken, or held by another process until `expiresAt` (RFC 3339). */
export type LockAttempt = { acquired: true } | { acquired: false; holder: string; expiresAt: string };

/**
 * The one-socket lock of an instance (docs/decisions/0025-live-engine.md): at most one process holds an open platform
 * connection on the instance's credentials. An engine whose platform allows one connection per credential takes it
 * before it connects and releases it when it closes; the session side implements it (src/sessions/instance-lock.ts).
 */
export interface SessionLock {
  /** True while this process holds the lock (as far as it knows). */
  readonly held: boolean;
  /** Takes the lock (and keeps it alive) or says who holds it. Idempotent while held. @throws on store errors. */
  acquire(): Promise<LockAttempt>;
  /** Gives the lock up; a no-op when not held. */
  release(): Promise<void>;
}

/** What a {@link SessionLock} reports to its session. */
export interface SessionLockHooks {
  /** Called once when the lock is lost (taken over, or not renewed before it expired). */
  onLost: (reason: string) => void;
  /** Called when a renewal fails (the lock is kept until it would expire). */
  onRenewError?: (error: unknown) => void;
  /** The session's clock (epoch ms). */
  clock: Clock;
}

/** Makes the lock of one instance for this process (a port: the engine never sees how it is stored). */
export interface SessionLocks {
  forInstance(instanceId: string, hooks: SessionLockHooks): SessionLock;
}

/**
 * What a session gets from parley (the Kysely `DatabaseConnection` analogue): its instance, a persistence port
 * for credentials, and the sink its events go to.
 */
export interface EngineSessionContext {
  instanceId: string;
  env: Environment;
  /** Credentials and platform state of this instance, sealed at rest (docs/decisions/0020-security-promises.md). */
  auth: AuthStateStore;
  /**
   * Delivers an event to the subscribers (store, outbox) and resolves once it is recorded. Engines await it
   * where the event is the result of a call (a send), so the call returns only after the event is recorded
   * (docs/decisions/0024-engines-and-data-flow.md). A store that cannot be reached is retried without limit
   * (docs/decisions/0011-store-faults.md), so it rejects only on a permanent error (a bug, already logged) or at
   * shutdown: a call path lets that propagate, a platform-driven path catches it.
   */
  emit(event: EngineEvent): Promise<void>;
  /**
   * Counts one platform event the engine has queued and not yet handed to {@link emit} in the process's backlog
   * of events waiting to be recorded (docs/deploy.md, What a database restart does); call the returned function
   * once, when the event's turn comes. Absent: nothing is counted.
   */
  waiting?(): () => void;
  /**
   * Looks up a stored message of this instance by id (sent or received), for quoting replies and answering the
   * platform's retry requests; undefined when parley never stored it.
   */
  findMessage(id: string): Promise<EngineMessage | undefined>;
  /**
   * The instance's call handling, read when a call offer arrives
   * (docs/decisions/0026-chats-edits-polls-and-calls.md): with `reject` the engine rejects the call and sends
   * `message` (when set) to the caller. Absent: calls are never rejected.
   */
  callSettings?(): Promise<CallSettings>;
  logger: FastifyBaseLogger;
  clock: Clock;
}

/**
 * A platform adapter (docs/decisions/0024-engines-and-data-flow.md): the sandbox for test keys, Baileys for live
 * keys. Engines only translate between the platform and {@link EngineEvent}s / calls; they never write webhook rows
 * or HTTP responses.
 */
export interface Engine {
  /** The engine's name in logs and in the registry of engines (`sandbox`, `baileys`, …). */
  readonly name: string;
  /** Creates the (not yet connected) session object of one instance. Cheap: no I/O. */
  createSession(context: EngineSessionContext): EngineSession;
  /** Releases engine-wide resources at shutdown. */
  close?(): Promise<void>;
}

/**
 * The lifecycle of one instance's connection to the platform: `connect` → (pairing → logged in) → `disconnect`
 * or `logout`; `close` at process shutdown; plus the two engine-specific ways to pair. Errors of every
 * capability are `DomainError`s: `conflict`, `not_logged_in` or `not_connected` for state conflicts
 * (docs/decisions/0001-envelope-and-error-codes.md), `platform_refused` when the platform refuses,
 * `platform_unreachable` when it cannot be reached.
 */
export interface SessionLifecycle {
  /**
   * Opens the connection, restoring stored credentials when present; without credentials a pairing attempt
   * starts (QR codes per docs/decisions/0016-session-lifecycle.md). Idempotent while connected. Resolves once the
   * attempt has started.
   */
  connect(): Promise<void>;
  /**
   * Resolves true once logged in and connected, or false after `timeoutMs` milliseconds
   * (docs/decisions/0016-session-lifecycle.md).
   */
  waitForLogin(timeoutMs: number): Promise<boolean>;
  /** The current state; cheap and synchronous. */
  state(): ConnectionState;
  /** The current QR pairing code, or null when no pairing attempt is running. */
  pairingCode(): PairingCode | null;
  /** Closes the connection and keeps credentials: a later `connect` needs no scan (docs/api.md#session). */
  disconnect(): Promise<void>;
  /** Unlinks the device and deletes the credentials (docs/api.md#session). */
  logout(): Promise<void>;
  /** Releases resources at process shutdown without changing what is stored. */
  close(): Promise<void>;
  /** Live engine only: links by an 8-character pairing code typed on the phone instead of a QR scan. */
  requestPairingCode?(phone: string): Promise<string>;
  /** Sandbox engine only: the simulated platform's test helpers (docs/decisions/0004-sandbox.md). */
  readonly sandbox?: SandboxControls;
}

/** Sending messages, reactions and read receipts; every call needs the session logged in and connected. */
export interface MessagingCapability {
  /**
   * A new platform message id for a send of this account (the platform's `3EB0…` shape), made before the relay so
   * the send job is stored under it (docs/decisions/0009-sends-as-jobs.md). Works while the socket is down.
   * @throws DomainError not_logged_in before the account is linked.
   */
  messageId(): Promise<string>;
  /**
   * Relays a message under `message.id` (a new id when absent) and resolves once its `message` event is recorded.
   * Relaying the same id again sends the same message again, which the platform's clients show once. A message to
   * `status@broadcast` is a status update shown to the users of its `statusJidList`, recorded with that chat
   * (docs/decisions/0044-status-stories.md).
   * @throws DomainError conflict `instance is not logged in`.
   */
  send(message: OutgoingMessage): Promise<SentMessage>;
  /** Reacts to message `targetId` in `chat`; `fromMe` marks one of the account's own messages; '' removes. */
  react(chat: Jid, targetId: string, fromMe: boolean, emoji: string, sender?: Jid): Promise<SentMessage>;
  /** Sends read receipts for `ids` in `chat`; `sender` is required for group chats (docs/api.md#messages). */
  markRead(chat: Jid, ids: readonly string[], sender?: Jid): Promise<void>;
  /**
   * Replaces the text of the account's own text message `id` in `chat` (the caller checked ownership and the
   * edit window) and records a `messageUpdate` event of kind `edit`; resolves with the edit's time.
   */
  edit(chat: Jid, id: string, text: string): Promise<SentMessage>;
  /** Deletes the account's own message `id` in `chat` for everyone; records a `messageUpdate` of kind `delete`. */
  revoke(chat: Jid, id: string): Promise<SentMessage>;
  /** Shows `state` in `chat` (typing, recording, paused) or the account's availability (available, unavailable). */
  sendPresence(chat: Jid, state: ChatPresenceState): Promise<void>;
}

/** Registration checks and profile lookups (docs/api.md#contacts). */
export interface ContactsCapability {
  /** Checks which phone numbers are registered, one entry per number, in order (docs/api.md#contacts). */
  checkPhones(phones: readonly string[]): Promise<UserCheck[]>;
  /** Profile details of users (docs/api.md#contacts). */
  userInfo(phones: readonly string[]): Promise<UserInfo[]>;
  /** Profile picture of a user, or null when none (docs/api.md#contacts: 404). */
  avatar(phone: string): Promise<Avatar | null>;
  /** Contacts the platform knows for the account (merged with stored contacts by the caller). */
  contacts(): Promise<Contact[]>;
}

/** Groups the account belongs to (docs/api.md#groups). */
export interface GroupsCapability {
  /** Creates a group; the account becomes owner, admin and super admin (docs/api.md#groups). */
  createGroup(name: string, participants: readonly Jid[]): Promise<GroupInfo>;
  /** Every group the account belongs to. */
  listGroups(): Promise<GroupInfo[]>;
  /** One group. @throws DomainError not_found when the account is not in it. */
  groupInfo(jid: Jid): Promise<GroupInfo>;
  /**
   * The invite code of a group. @throws DomainError forbidden when the account is not an admin (docs/api.md#errors).
   */
  groupInviteCode(jid: Jid): Promise<string>;
  /**
   * Adds, removes, promotes or demotes `participants` (user JIDs); one outcome per participant, in order, with
   * the platform's code (Baileys groupParticipantsUpdate). @throws DomainError not_found when the account is not
   * in the group; forbidden when it is not an admin.
   */
  updateParticipants(
    jid: Jid,
    action: ParticipantAction,
    participants: readonly Jid[],
  ): Promise<ParticipantOutcome[]>;
  /**
   * Changes the group's name, topic and settings, in the order of {@link GroupChange} (Baileys
   * groupUpdateSubject, groupUpdateDescription, groupSettingUpdate, groupToggleEphemeral).
   * @throws DomainError not_found; forbidden when the account may not make the change.
   */
  updateGroup(jid: Jid, change: GroupChange): Promise<void>;
  /** The account leaves the group (Baileys groupLeave). @throws DomainError not_found. */
  leaveGroup(jid: Jid): Promise<void>;
  /** Joins a group by invite code; returns its JID (Baileys groupAcceptInvite). @throws DomainError not_found. */
  joinGroup(code: string): Promise<Jid>;
  /** Revokes the invite code and returns the new one (Baileys groupRevokeInvite). @throws DomainError forbidden. */
  revokeGroupInvite(jid: Jid): Promise<string>;
}

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
   *   host cannot be reached; platform_refused when it answers an error or the file fails its integrity checks;
   *   not_found when the message has no reference.
   */
  downloadMedia(
    message: EngineMessage,
    maxBytes: number,
    options?: MediaDownloadOptions,
  ): Promise<AsyncIterable<Buffer>>;
}

/**
 * What every engine's session offers: the lifecycle plus the messaging, contacts and groups capabilities, and
 * media downloads where the engine has them. The application services depend on the capability they use, so
 * an engine (or a test fake) is checked per family.
 */
export interface EngineSession
  extends SessionLifecycle,
    MessagingCapability,
    ContactsCapability,
    GroupsCapability,
    Partial<MediaCapability>,
    Partial<LidCapability>,
    Partial<AccountCapability>,
    Partial<CallsCapability>,
    Partial<ChannelsCapability>,
    Partial<ChatActionsCapability>,
    Partial<LabelsCapability> {}

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
   * the call id and the status the call is in.
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
}
