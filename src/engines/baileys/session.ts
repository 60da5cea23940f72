import type { Agent } from 'node:https';
import { type GroupMetadata, jidNormalizedUser, type proto } from 'baileys';
import type { EngineCall } from '../../domain/calls.ts';
import type { Channel, ChannelRef } from '../../domain/channels.ts';
import { errors } from '../../domain/errors.ts';
import type { GroupChange, ParticipantAction, ParticipantOutcome } from '../../domain/groups.ts';
import type { Label, LabelEdit } from '../../domain/labels.ts';
import type { LidMapping } from '../../domain/lids.ts';
import type {
  Avatar,
  ChatPresenceState,
  ConnectionState,
  Contact,
  EngineMessage,
  GroupInfo,
  Jid,
  OutgoingMessage,
  PairingCode,
  SentMessage,
  UserCheck,
  UserInfo,
} from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../../domain/profile.ts';
import type {
  ChatAction,
  ChatMessageRef,
  CloseOptions,
  EngineSession,
  EngineSessionContext,
  MediaDownloadOptions,
} from '../engine.ts';
import { AccountOperations } from './account-operations.ts';
import { AuthStoreMemo } from './auth-memo.ts';
import type { BoundedCache } from './cache.ts';
import { CallHandler } from './calls.ts';
import { avatarOf, CONTACTS_CATEGORY, ContactBook, checkPhones, userInfo } from './contacts.ts';
import { mapPlatformErrors } from './errors.ts';
import * as admin from './group-admin.ts';
import { keepGroup } from './groups.ts';
import type { Identity, MappingContext } from './incoming.ts';
import { JidResolver, toPhoneJid } from './jid.ts';
import { LearnedLids } from './lids.ts';
import { Lifecycle } from './lifecycle.ts';
import { attachListeners, IncomingQueue } from './listeners.ts';
import {
  downloadPlatformMedia,
  MediaLinkGone,
  movedMediaReference,
  parseMediaReference,
} from './media-download.ts';
import { MEDIA_REUPLOAD_TIMEOUT_MS, REUPLOAD_STATUSES, requestMediaReupload } from './media-reupload.ts';
import * as ops from './operations.ts';
import { resendableProto } from './outgoing.ts';
import { type BaileysSessionOptions, quieterLevel, SessionCaches, socketConfig } from './session-options.ts';
import type { BaileysLogger, SocketLike } from './socket.ts';

import { operationSocket, requestPairingCode } from './socket-access.ts';
import * as updates from './updates.ts';

/**
 * One live instance (docs/decisions/0025-live-engine.md): the socket lifecycle (`Lifecycle`), the translation of
 * Baileys events into domain events, and the operations of docs/api.md. Incoming events are mapped and emitted one at
 * a time in arrival order. Every cache is bounded (`BoundedCache`, `JidResolver`) and the socket's listeners are
 * removed when it ends.
 */
export class BaileysSession implements EngineSession {
  readonly #context: EngineSessionContext;
  readonly #life: Lifecycle;
  readonly #resolver: JidResolver;
  readonly #contacts: ContactBook;
  readonly #mapping: MappingContext;
  readonly #groups: BoundedCache;
  readonly #recent: BoundedCache;
  readonly #presence: BoundedCache;
  readonly #caches: SessionCaches;
  readonly #baileysLogger: BaileysLogger;
  readonly #deps: ops.OperationDeps;
  readonly #calls: CallHandler;
  readonly #queue: IncomingQueue;
  readonly #mediaAgent: Agent | undefined;
  readonly #reuploadTimeoutMs: number;
  /** Pairs the resolver learned, on their way to a `lid-mapping` event (docs/decisions/0038-lid-mappings.md). */
  readonly #learned: LearnedLids;
  /** The operations on the account's own state (account-operations.ts). */
  readonly #account: AccountOperations;
  /**
   * Aborted when the session stops (close, disconnect, logout, a lost lock), made anew by the next connect: the
   * incoming work a stop waits for (a group metadata read for a deletion, group-revokes.ts) gives up at once.
   */
  #stopping = new AbortController();

  constructor(sessionContext: EngineSessionContext, options: BaileysSessionOptions) {
    // Every part of the session reads and writes the auth store through one memo (auth-memo.ts), which is only right
    // when nothing goes around it.
    const context = { ...sessionContext, auth: new AuthStoreMemo(sessionContext.auth, [CONTACTS_CATEGORY]) };
    this.#context = context;
    this.#mediaAgent = options.mediaAgent;
    this.#reuploadTimeoutMs = options.mediaReuploadTimeoutMs ?? MEDIA_REUPLOAD_TIMEOUT_MS;
    // The pairs learned go before any event the queue records (docs/decisions/0038-lid-mappings.md).
    this.#queue = new IncomingQueue(context, () => this.#learned.recordPending());
    // A pair whose event was not recorded is told again by the resolver the next time the platform teaches it.
    this.#learned = new LearnedLids(this.#queue, (mappings) => this.#resolver.untold(mappings));
    const now = () => context.clock();
    this.#caches = new SessionCaches(now);
    this.#groups = this.#caches.groups;
    this.#recent = this.#caches.recent;
    this.#presence = this.#caches.presence;
    this.#baileysLogger = context.logger.child(
      { component: 'baileys' },
      { level: quieterLevel(context.logger.level, options.baileysLogLevel) },
    );
    this.#resolver = new JidResolver({
      lookup: () => this.#life.socket?.signalRepository.lidMapping,
      // parley's kept pairs, so a LID known before a restart or a hand-over is named by phone JID
      // (docs/decisions/0038-lid-mappings.md).
      ...(context.keptLidPhone ? { kept: context.keptLidPhone.bind(context) } : {}),
      onLookupError: (error, lid) =>
        context.logger.warn({ err: error, lid }, 'LID lookup failed; passing the LID on unresolved'),
      onLearned: (mapping) => this.#learned.add(mapping),
    });
    this.#contacts = new ContactBook(context.auth);
    this.#mapping = { resolver: this.#resolver, me: () => this.#me() };
    const lock = options.locks.forInstance(context.instanceId, {
      clock: context.clock,
      onLost: (reason) => {
        this.#stopping.abort();
        this.#life.lockLost(reason).catch((error: unknown) => {
          context.logger.error({ err: error, reason }, 'stopping after the one-socket lock was lost failed');
        });
      },
      onRenewError: (error) => context.logger.warn({ err: error }, 'renewing the one-socket lock failed'),
    });
    this.#life = new Lifecycle({
      context,
      lock,
      socketFactory: options.socketFactory,
      baileysLogger: this.#baileysLogger,
      socketConfig: () =>
        socketConfig(
          options,
          this.#caches,
          async (key) => this.#getMessage(key.id),
          (jid) => this.#fetchGroup(jid),
        ),
      version: options.version,
      fetchVersion: options.fetchVersion,
      keyCache: this.#caches.keyCache,
      connectDeadlineMs: options.connectDeadlineMs,
      random: options.random,
      loginRefusalLimit: options.loginRefusalLimit,
      attach: (sock) =>
        attachListeners(sock, {
          context,
          mapping: this.#mapping,
          resolver: this.#resolver,
          contacts: this.#contacts,
          groups: this.#groups,
          fetchGroup: (jid) => this.#fetchGroup(jid),
          stopping: this.#stopping.signal,
          queue: this.#queue,
          subscribePresence: (s, jid) => this.#subscribePresence(s, jid),
          calls: (s, calls) => this.#calls.handle(s, calls),
        }),
    });
    this.#deps = {
      context,
      mapping: this.#mapping,
      groups: this.#groups,
      recent: this.#recent,
      ackTimeoutMs: options.ackTimeoutMs,
      baileysLogger: this.#baileysLogger,
      reachout: () => this.#life.reachout,
      record: (event) => context.emit(event),
      subscribePresence: (sock, jid) => this.#subscribePresence(sock, jid),
      ...(options.linkPreview ? { linkPreview: options.linkPreview } : {}),
    };
    this.#calls = new CallHandler({
      context,
      resolver: this.#resolver,
      record: (event) => this.#queue.record(event),
      send: (sock, message) => ops.sendMessage(sock, this.#deps, message),
    });
    this.#account = new AccountOperations({
      context,
      life: this.#life,
      resolver: this.#resolver,
      calls: this.#calls,
      open: () => this.#open(),
      recorded: () => this.#queue.drained(),
    });
  }

  connect(): Promise<void> {
    if (this.#stopping.signal.aborted) this.#stopping = new AbortController();
    return this.#life.connect();
  }
  /**
   * The file of a media message, from the platform's media host (no connection needed; media-download.ts). When
   * the host answers that the link expired (404/410), the sender's phone is asked to upload the file again over
   * the connection (media-reupload.ts, docs/decisions/0046-media-re-upload.md); `options.onMoved` gets the new
   * reference before the file is fetched from it.
   */
  async downloadMedia(
    message: EngineMessage,
    maxBytes: number,
    options: MediaDownloadOptions = {},
  ): Promise<AsyncIterable<Buffer>> {
    const reference = message.content.download;
    if (reference === undefined) throw errors.notFound(`message ${message.id} has no downloadable media`);
    try {
      return await downloadPlatformMedia(reference, message.id, maxBytes, this.#mediaAgent);
    } catch (error) {
      const parsed = parseMediaReference(reference);
      if (!(error instanceof MediaLinkGone) || !REUPLOAD_STATUSES.has(error.hostStatus) || !parsed)
        throw error;
      const sock = await this.#open();
      const mediaKey = Buffer.from(parsed.mediaKey, 'base64');
      const directPath = await requestMediaReupload(sock, message, mediaKey, this.#reuploadTimeoutMs);
      const moved = movedMediaReference(parsed, directPath, message.id);
      await options.onMoved?.(moved);
      return downloadPlatformMedia(moved, message.id, maxBytes, this.#mediaAgent);
    }
  }
  waitForLogin(timeoutMs: number): Promise<boolean> {
    return this.#life.waitForLogin(timeoutMs);
  }
  state(): ConnectionState {
    return this.#life.state();
  }
  /**
   * True in the lifecycle's phases that end in a login by themselves (phase.ts): `waiting` (a reconnect's backoff),
   * `connecting` (a socket opening), and `pairing` once scanned (the platform's restart after the scan).
   */
  reconnecting(): boolean {
    const phase = this.#life.phase;
    return (
      phase === 'waiting' || phase === 'connecting' || (phase === 'pairing' && this.#life.state().loggedIn)
    );
  }
  pairingCode(): PairingCode | null {
    return this.#life.pairingCode();
  }
  disconnect(): Promise<void> {
    this.#stopping.abort();
    return this.#life.disconnect();
  }
  async logout(): Promise<void> {
    this.#stopping.abort();
    await this.#life.logout();
    for (const cache of this.#caches.all) cache.flushAll();
  }
  /**
   * Ends the session at shutdown or hand-over: the incoming work under way stops waiting on the platform at once
   * ({@link #stopping}), the socket is closed (Lifecycle.close), and the events queued are recorded first.
   */
  async close(options?: CloseOptions): Promise<void> {
    this.#stopping.abort();
    await this.#life.close(options);
    await this.#queue.drained();
    for (const cache of this.#caches.all) cache.close();
  }

  async messageId(): Promise<string> {
    return ops.newMessageId(this.#deps);
  }
  async send(message: OutgoingMessage): Promise<SentMessage> {
    return ops.sendMessage(await this.#open(), this.#deps, message);
  }
  async react(
    chat: Jid,
    targetId: string,
    fromMe: boolean,
    emoji: string,
    sender?: Jid,
  ): Promise<SentMessage> {
    const input = { chat, targetId, fromMe, emoji, ...(sender ? { sender } : {}) };
    return ops.sendReaction(await this.#open(), this.#deps, input);
  }
  async markRead(chat: Jid, ids: readonly string[], sender?: Jid): Promise<void> {
    await ops.markRead(await this.#open(), this.#deps, chat, ids, sender);
  }
  async edit(chat: Jid, id: string, text: string): Promise<SentMessage> {
    return updates.editMessage(await this.#open(), this.#deps, chat, id, text);
  }
  async revoke(chat: Jid, id: string): Promise<SentMessage> {
    return updates.revokeMessage(await this.#open(), this.#deps, chat, id);
  }
  async sendPresence(chat: Jid, state: ChatPresenceState): Promise<void> {
    await updates.sendChatPresence(await this.#open(), this.#deps, chat, state);
  }
  async checkPhones(phones: readonly string[]): Promise<UserCheck[]> {
    const sock = await this.#open();
    return mapPlatformErrors(() => checkPhones(sock, phones), { now: this.#context.clock() });
  }
  async userInfo(phones: readonly string[]): Promise<UserInfo[]> {
    const sock = await this.#open();
    return mapPlatformErrors(() => userInfo(sock, phones), { now: this.#context.clock() });
  }
  async avatar(phone: string): Promise<Avatar | null> {
    const sock = await this.#open();
    return mapPlatformErrors(() => avatarOf(sock, userJid(phone)), { now: this.#context.clock() });
  }
  async contacts(): Promise<Contact[]> {
    await this.#life.loadSummary();
    if (!this.#life.state().loggedIn) throw errors.notLoggedIn();
    return this.#contacts.list();
  }
  async createGroup(name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    return admin.createGroup(await this.#open(), this.#deps, name, participants);
  }
  async listGroups(): Promise<GroupInfo[]> {
    return admin.listGroups(await this.#open(), this.#deps);
  }
  async groupInfo(jid: Jid): Promise<GroupInfo> {
    return admin.groupInfo(await this.#open(), this.#deps, jid);
  }
  async groupInviteCode(jid: Jid): Promise<string> {
    return admin.groupInviteCode(await this.#open(), this.#deps, jid);
  }
  async updateParticipants(
    jid: Jid,
    action: ParticipantAction,
    participants: readonly Jid[],
  ): Promise<ParticipantOutcome[]> {
    return admin.updateParticipants(await this.#open(), this.#deps, jid, action, participants);
  }
  async updateGroup(jid: Jid, change: GroupChange): Promise<void> {
    return admin.updateGroup(await this.#open(), this.#deps, jid, change);
  }
  async leaveGroup(jid: Jid): Promise<void> {
    return admin.leaveGroup(await this.#open(), this.#deps, jid);
  }
  async joinGroup(code: string): Promise<Jid> {
    return admin.joinGroup(await this.#open(), this.#deps, code);
  }
  async revokeGroupInvite(jid: Jid): Promise<string> {
    return admin.revokeGroupInvite(await this.#open(), this.#deps, jid);
  }

  // The account's own state: delegated to account-operations.ts (each documented on its capability,
  // src/engines/capabilities.ts).
  listChannels(): Promise<Channel[]> {
    return this.#account.listChannels();
  }
  followChannel(ref: ChannelRef): Promise<Channel> {
    return this.#account.followChannel(ref);
  }
  unfollowChannel(ref: ChannelRef): Promise<Channel> {
    return this.#account.unfollowChannel(ref);
  }
  rejectCall(id: string): Promise<EngineCall> {
    return this.#account.rejectCall(id);
  }
  lidMapping(query: { lid: string } | { phone: string }): Promise<LidMapping | null> {
    return this.#account.lidMapping(query);
  }
  profile(): Promise<AccountProfile> {
    return this.#account.profile();
  }
  updateProfile(change: ProfileChange): Promise<AccountProfile> {
    return this.#account.updateProfile(change);
  }
  privacy(): Promise<PrivacySettings> {
    return this.#account.privacy();
  }
  updatePrivacy(change: PrivacyChange): Promise<PrivacySettings> {
    return this.#account.updatePrivacy(change);
  }
  blocklist(): Promise<string[]> {
    return this.#account.blocklist();
  }
  setBlocked(phone: string, action: 'block' | 'unblock'): Promise<string[]> {
    return this.#account.setBlocked(phone, action);
  }
  chatAction(chat: Jid, action: ChatAction, last: readonly ChatMessageRef[]): Promise<void> {
    return this.#account.chatAction(chat, action, last);
  }
  starMessage(chat: Jid, message: { id: string; fromMe: boolean }, star: boolean): Promise<void> {
    return this.#account.starMessage(chat, message, star);
  }
  isBusiness(): Promise<boolean> {
    return this.#account.isBusiness();
  }
  editLabel(edit: LabelEdit): Promise<void> {
    return this.#account.editLabel(edit);
  }
  labelChat(chat: Jid, label: Label, labeled: boolean): Promise<void> {
    return this.#account.labelChat(chat, label, labeled);
  }
  syncLabels(): Promise<void> {
    return this.#account.syncLabels();
  }

  /** Links by an 8-character code typed on the phone (socket-access.ts, `requestPairingCode`). */
  requestPairingCode(phone: string): Promise<string> {
    return requestPairingCode(this.#life, phone);
  }

  /** The open socket for an operation (socket-access.ts, `operationSocket`). */
  #open(): Promise<SocketLike> {
    return operationSocket(this.#life);
  }

  #me(): Identity {
    const me = this.#life.creds?.me;
    const phoneJid = me?.id ? toPhoneJid(me.id) : null;
    return { phoneJid, lid: me?.lid ? jidNormalizedUser(me.lid) : null, pushName: me?.name ?? '' };
  }

  async #getMessage(id: string | null | undefined): Promise<proto.IMessage | undefined> {
    if (!id) return undefined;
    const recent = this.#recent.get<proto.IMessage>(id);
    if (recent) return recent;
    try {
      const found = await this.#context.findMessage(id);
      return found ? resendableProto(found.content) : undefined;
    } catch (error) {
      // The platform asked to resend a message the store could not read: it is answered as unknown.
      this.#context.logger.warn({ err: error, id }, 'reading a stored message for a platform retry failed');
      return undefined;
    }
  }

  /**
   * Group `jid`'s metadata for a send Baileys relays to it while the cache does not hold it (session-options.ts
   * `socketConfig`): fetched through the current socket, kept in the cache and teaching the resolver its members'
   * LID pairs (groups.ts `keepGroup`, docs/decisions/0038-lid-mappings.md), so a member's receipts name them by phone
   * JID. Undefined without a socket (Baileys then fetches it itself). @throws the socket's error (the send fails).
   */
  async #fetchGroup(jid: string): Promise<GroupMetadata | undefined> {
    const sock = this.#life.socket;
    if (!sock) return undefined;
    const meta = await sock.groupMetadata(jid);
    keepGroup(meta, this.#groups, this.#resolver);
    return meta;
  }

  #subscribePresence(sock: SocketLike, jid: Jid): void {
    if (this.#presence.get(jid)) return;
    this.#presence.set(jid, true);
    sock.presenceSubscribe(jid).catch((error: unknown) => {
      this.#context.logger.debug({ err: error }, 'presence subscription failed');
    });
  }
}
