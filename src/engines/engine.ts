import type { FastifyBaseLogger } from 'fastify';
import type { CallSettings } from '../domain/calls.ts';
import type { Clock } from '../domain/clock.ts';
import type { Environment } from '../domain/environment.ts';
import { DomainError } from '../domain/errors.ts';
import type { GroupChange, ParticipantAction, ParticipantOutcome } from '../domain/groups.ts';
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
import type {
  AccountCapability,
  CallsCapability,
  ChannelsCapability,
  ChatActionsCapability,
  LabelsCapability,
  LidCapability,
  MediaCapability,
} from './capabilities.ts';
import type { SandboxControls } from './sandbox-controls.ts';

// The optional capabilities and the sandbox's test helpers live in their own files; they are re-exported here so
// every engine port is imported from this one module.
export type {
  AccountCapability,
  CallsCapability,
  ChannelsCapability,
  ChatAction,
  ChatActionsCapability,
  ChatMessageRef,
  LabelsCapability,
  LidCapability,
  MediaCapability,
  MediaDownloadOptions,
} from './capabilities.ts';
export type {
  SandboxCallInput,
  SandboxControls,
  SandboxForeignGroupInput,
  SandboxGroupChangeInput,
  SandboxInboundInput,
  SandboxInboundMediaInput,
  SandboxMediaKind,
  SandboxPresenceInput,
  SandboxReceiptInput,
  SandboxUpdateInput,
  SandboxUserInput,
  SandboxVoteInput,
} from './sandbox-controls.ts';

/** One entry of an {@link AuthStateStore}: the value of key `id` of `category` (a string; `null` removes the key). */
export interface AuthEntry {
  category: string;
  id: string;
  value: string | null;
}

/**
 * Per-instance persistence port handed to an engine for its credentials and platform-side state
 * (docs/decisions/0024-engines-and-data-flow.md: engines never touch tables themselves). Values are JSON-serialisable
 * text chosen by the engine; they are sealed with the master key at rest (docs/decisions/0020-security-promises.md).
 */
export interface AuthStateStore {
  /** Reads the values of `ids` in `category`; missing ids are absent from the result. */
  get(category: string, ids: readonly string[]): Promise<Map<string, string>>;
  /** Writes (value string) or deletes (null) many entries in one transaction. */
  set(entries: readonly AuthEntry[]): Promise<void>;
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
  /**
   * The session's clock (epoch ms): the lock's clock only when the port has none of its own (the services' port
   * judges expiries on the store's clock, docs/decisions/0008-leases-and-fencing.md, "One clock").
   */
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
   * Writes `entries` to {@link auth} and records `events` (in order, after the session's earlier events) in one
   * transaction, so both are kept or neither is (docs/decisions/0077-state-with-its-events.md): a platform change the
   * engine keeps in its state and the events that report it, which a crash between two writes would part. Retried
   * as {@link emit} is; resolves once committed. A connection state may only come first (its session status is
   * recorded right after it, as when it is emitted alone: a sandbox login kept with its credentials and the events
   * that follow it). Not for the own `message` of a send (its job is marked `sent` with it only when it is emitted
   * alone: src/sends/queue.ts `prepare`).
   * @throws as {@link emit} (nothing of either kept); an Error for a connection state after the first event.
   */
  emitWith(entries: readonly AuthEntry[], events: readonly EngineEvent[]): Promise<void>;
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
   * The phone number (digits) of the phone↔LID pair parley keeps for LID `lid` (digits) of this instance
   * (`lid_mappings`, docs/decisions/0038-lid-mappings.md), undefined when none is kept: an engine whose own memory
   * of pairs starts empty (after a restart or a hand-over) names a user it knows by phone JID in its payloads.
   * Absent: no kept pair is asked. @throws the store's error (not retried).
   */
  keptLidPhone?(lid: string): Promise<string | undefined>;
  /**
   * {@link keptLidPhone} for many LIDs (digits) in one read of the store (a few for thousands): the phone number
   * (digits) of each LID parley keeps a pair for, by LID; the others are absent. Asked where a list names many users
   * at once (the contacts list). Absent: {@link keptLidPhone} is asked per LID. @throws the store's error (not
   * retried).
   */
  keptLidPhones?(lids: readonly string[]): Promise<ReadonlyMap<string, string>>;
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
  /**
   * Prepares the engine before its first session (loads its code: src/engines/deferred.ts); idempotent. The session
   * manager awaits it before each `createSession`. Absent: nothing to prepare.
   * @throws what preparing threw; a later call tries again.
   */
  init?(): Promise<void>;
  /** Creates the (not yet connected) session object of one instance. Cheap: no I/O. */
  createSession(context: EngineSessionContext): EngineSession;
  /** Releases engine-wide resources at shutdown. */
  close?(): Promise<void>;
}

/** How a session closes ({@link SessionLifecycle.close}). */
export interface CloseOptions {
  /** End the connection at once (the lease is lost or about to expire); default false: a graceful close. */
  fenced?: boolean;
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
  /**
   * True while the connection is down and the engine brings it back by itself: a reconnect waiting out its backoff,
   * a socket opening, the platform's restart after a scan (docs/decisions/0016-session-lifecycle.md). False while
   * connected, and while stopped until the next `connect` (disconnected, replaced, refused by the platform). An
   * engine that never reconnects by itself (the sandbox) leaves it out. Cheap and synchronous.
   */
  reconnecting?(): boolean;
  /** The current QR pairing code, or null when no pairing attempt is running. */
  pairingCode(): PairingCode | null;
  /** Closes the connection and keeps credentials: a later `connect` needs no scan (docs/api.md#session). */
  disconnect(): Promise<void>;
  /** Unlinks the device and deletes the credentials (docs/api.md#session). */
  logout(): Promise<void>;
  /**
   * Releases resources at process shutdown or hand-over without changing what is stored. With `fenced` (several
   * nodes: the instance's lease is lost or about to expire, docs/decisions/0008-leases-and-fencing.md) the
   * connection ends at once, without letting the incoming stanzas being handled finish first: another node may
   * open its own once the lease expires.
   */
  close(options?: CloseOptions): Promise<void>;
  /** Live engine only: links by an 8-character pairing code typed on the phone instead of a QR scan. */
  requestPairingCode?(phone: string): Promise<string>;
  /** Sandbox engine only: the simulated platform's test helpers (docs/decisions/0004-sandbox.md). */
  readonly sandbox?: SandboxControls;
}

/**
 * Raised by an engine whose message reached the platform but whose `message` event (or `messageUpdate`) could not
 * be recorded even after the recording's retry gave up (a permanent store error, an unknown one tried out, or the
 * shutdown ending the wait; docs/decisions/0024-engines-and-data-flow.md). `sent` is what the send would have
 * resolved with, `cause` the recording's error. The send queue ends such a job `sent`, never `failed`: a failed job
 * tells its client to send the message again, a second time (docs/decisions/0009-sends-as-jobs.md). Only `send`
 * raises it; the other calls that relay a message (reactions, edits, deletes) raise the recording's own error.
 */
export class UnrecordedSendError extends Error {
  override name = 'UnrecordedSendError';
  /** The relayed message's id and platform timestamp (epoch ms). */
  readonly sent: SentMessage;

  constructor(sent: SentMessage, cause: unknown) {
    super(`message ${sent.id} reached the platform but recording it failed`, { cause });
    this.sent = sent;
  }
}

/**
 * Raised by an engine whose message was handed to the platform's connection but never confirmed: no ack arrived
 * within the engine's wait, or the connection closed first. Its outcome is not known: the platform may have taken it
 * (the ack was lost) or not (the connection was already dead). The engine drops that connection as lost, so its
 * reconnect starts at once. The send queue leaves such a job `sending` for the hand-back after the next login, which
 * relays it again under the same id, which the recipient's phone shows once (docs/decisions/0009-sends-as-jobs.md);
 * the job is never marked `sent` or `failed` for it. The other calls that relay a message (reactions, edits,
 * deletes) answer it as `504 timeout` (docs/decisions/0001-envelope-and-error-codes.md).
 */
export class UnconfirmedRelayError extends DomainError {
  /** The platform message id of the relay that was not confirmed. */
  readonly id: string;

  /** `why` says what ended the wait (`no ack within 5 s`, `the connection closed`). */
  constructor(id: string, why: string) {
    super(
      'timeout',
      `the platform did not confirm message ${id} (${why}): it may or may not have been delivered`,
    );
    this.name = 'UnconfirmedRelayError';
    this.id = id;
  }
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
   * @throws DomainError conflict `instance is not logged in`; {@link UnrecordedSendError} when the message reached
   *   the platform but recording it failed (an engine whose relay is its recording, the sandbox, raises the
   *   recording's own error instead: nothing went out).
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
