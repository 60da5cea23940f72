import type { Agent } from 'node:https';
import type { GroupMetadata, UserFacingSocketConfig, WABrowserDescription, WAVersion } from 'baileys';
import { jidDecode, jidNormalizedUser, type proto } from 'baileys';
import type { EngineCall } from '../../domain/calls.ts';
import type { Channel, ChannelRef } from '../../domain/channels.ts';
import { DomainError, errors } from '../../domain/errors.ts';
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
  EngineSession,
  EngineSessionContext,
  MediaDownloadOptions,
  SessionLocks,
} from '../engine.ts';
import { BoundedCache } from './cache.ts';
import { CallHandler } from './calls.ts';
import * as channels from './channels.ts';
import * as chatActions from './chat-actions.ts';
import { avatarOf, ContactBook, checkPhones, userInfo } from './contacts.ts';
import { mapPlatformErrors } from './errors.ts';
import * as admin from './group-admin.ts';
import type { Identity, MappingContext } from './incoming.ts';
import { JidResolver, toPhoneJid } from './jid.ts';
import * as labels from './labels.ts';
import { LearnedLids, lookupLidMapping } from './lids.ts';
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
import type { LinkPreviewFetcher } from './outgoing.ts';
import { resendableProto } from './outgoing.ts';
import * as profile from './profile.ts';
import type { BaileysLogger, SocketFactory, SocketLike } from './socket.ts';
import * as updates from './updates.ts';

/** Everything a session takes from the engine (see `BaileysEngineOptions` for meanings and defaults). */
export interface BaileysSessionOptions {
  locks: SessionLocks;
  socketFactory: SocketFactory;
  browser: WABrowserDescription;
  version: WAVersion | undefined;
  fetchVersion: () => Promise<WAVersion>;
  connectDeadlineMs: number;
  ackTimeoutMs: number;
  fullHistory: boolean;
  baileysLogLevel: string;
  linkPreview?: LinkPreviewFetcher;
  random: () => number;
  /** Keep-alive ping interval, ms (Baileys' `keepAliveIntervalMs`; a silent platform is declared lost after it + 5 s). */
  keepAliveIntervalMs: number;
  /** Platform refusals of a reconnecting login in a row after which the session stops (lifecycle.ts). */
  loginRefusalLimit: number;
  /** Retry of failed recordings (docs/decisions/0024-engines-and-data-flow.md): incoming events and sends. */
  /** WebSocket URL of a platform simulator (Baileys' `waWebSocketUrl`); undefined: the real platform. */
  platformUrl?: string;
  /** HTTPS agent for media uploads (Baileys' `fetchAgent`): trusts a simulator's media CA; undefined: Node's default. */
  mediaAgent?: Agent;
  /** Wait for a phone's answer to a media re-upload request, ms; default `MEDIA_REUPLOAD_TIMEOUT_MS` (media-reupload.ts). */
  mediaReuploadTimeoutMs?: number;
}

const HOUR = 3_600_000;

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/**
 * The less verbose of two pino levels: Baileys logs at `wanted` but never more than parley's own logger, so a
 * silent or error-only deployment stays that way (docs/decisions/0023-operations.md: Baileys logs stanzas at
 * info/debug).
 */
export function quieterLevel(parent: string, wanted: string): string {
  const p = LEVELS.indexOf(parent);
  const w = LEVELS.indexOf(wanted);
  if (p < 0) return w < 0 ? 'warn' : wanted;
  return w > p ? wanted : parent;
}

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
  readonly #caches: BoundedCache[];
  readonly #baileysLogger: BaileysLogger;
  readonly #deps: ops.OperationDeps;
  readonly #calls: CallHandler;
  readonly #queue: IncomingQueue;
  readonly #mediaAgent: Agent | undefined;
  readonly #reuploadTimeoutMs: number;
  /** Pairs the resolver learned, on their way to a `lid-mapping` event (docs/decisions/0038-lid-mappings.md). */
  readonly #learned: LearnedLids;
  /** Whether the account is a business account (docs/decisions/0045-business-labels.md). */
  readonly #business = new labels.BusinessCheck();

  constructor(context: EngineSessionContext, options: BaileysSessionOptions) {
    this.#context = context;
    this.#mediaAgent = options.mediaAgent;
    this.#reuploadTimeoutMs = options.mediaReuploadTimeoutMs ?? MEDIA_REUPLOAD_TIMEOUT_MS;
    this.#queue = new IncomingQueue(context);
    this.#learned = new LearnedLids(this.#queue);
    const now = () => context.clock();
    this.#groups = new BoundedCache(HOUR, 1_000, now);
    this.#recent = new BoundedCache(HOUR, 256, now);
    this.#presence = new BoundedCache(HOUR, 2_000, now);
    const keyCache = new BoundedCache(5 * 60_000, 20_000, now);
    const retries = new BoundedCache(HOUR, 5_000, now);
    const devices = new BoundedCache(5 * 60_000, 5_000, now);
    const calls = new BoundedCache(5 * 60_000, 100, now);
    const placeholders = new BoundedCache(HOUR, 1_000, now);
    this.#caches = [
      this.#groups,
      this.#recent,
      this.#presence,
      keyCache,
      retries,
      devices,
      calls,
      placeholders,
    ];
    this.#baileysLogger = context.logger.child(
      { component: 'baileys' },
      { level: quieterLevel(context.logger.level, options.baileysLogLevel) },
    );
    this.#resolver = new JidResolver({
      lookup: () => this.#life.socket?.signalRepository.lidMapping,
      onLookupError: (error, lid) =>
        context.logger.warn({ err: error, lid }, 'LID lookup failed; passing the LID on unresolved'),
      onLearned: (mapping) => this.#learned.add(mapping),
    });
    this.#contacts = new ContactBook(context.auth);
    this.#mapping = { resolver: this.#resolver, me: () => this.#me() };
    const lock = options.locks.forInstance(context.instanceId, {
      clock: context.clock,
      onLost: (reason) => {
        this.#life.lockLost(reason).catch((error: unknown) => {
          context.logger.error({ err: error, reason }, 'stopping after the one-socket lock was lost failed');
        });
      },
      onRenewError: (error) => context.logger.warn({ err: error }, 'renewing the one-socket lock failed'),
    });
    const socketConfig = (): Omit<UserFacingSocketConfig, 'auth' | 'logger' | 'version'> => ({
      browser: options.browser,
      markOnlineOnConnect: false,
      syncFullHistory: options.fullHistory,
      ...(options.fullHistory ? { shouldSyncHistoryMessage: () => true } : {}),
      emitOwnEvents: false,
      generateHighQualityLinkPreview: false,
      defaultQueryTimeoutMs: 20_000,
      keepAliveIntervalMs: options.keepAliveIntervalMs,
      getMessage: async (key) => this.#getMessage(key.id),
      cachedGroupMetadata: async (jid) => this.#groups.get<GroupMetadata>(jid),
      msgRetryCounterCache: retries,
      userDevicesCache: devices,
      callOfferCache: calls,
      placeholderResendCache: placeholders,
      ...(options.platformUrl ? { waWebSocketUrl: options.platformUrl } : {}),
      ...(options.mediaAgent ? { fetchAgent: options.mediaAgent } : {}),
    });
    this.#life = new Lifecycle({
      context,
      lock,
      socketFactory: options.socketFactory,
      baileysLogger: this.#baileysLogger,
      socketConfig,
      version: options.version,
      fetchVersion: options.fetchVersion,
      keyCache,
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
  }

  connect(): Promise<void> {
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
  pairingCode(): PairingCode | null {
    return this.#life.pairingCode();
  }
  disconnect(): Promise<void> {
    return this.#life.disconnect();
  }
  async logout(): Promise<void> {
    await this.#life.logout();
    for (const cache of this.#caches) cache.flushAll();
  }
  async close(): Promise<void> {
    await this.#life.close();
    await this.#queue.drained();
    for (const cache of this.#caches) cache.close();
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
  /** The channels the account follows (channels.ts). */
  async listChannels(): Promise<Channel[]> {
    return channels.listChannels(await this.#open());
  }
  /** Follows a channel (channels.ts). */
  async followChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(await this.#open(), ref, true);
  }
  /** Stops following a channel (channels.ts). */
  async unfollowChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(await this.#open(), ref, false);
  }
  /** Declines a ringing call (calls.ts `CallHandler.reject`). */
  async rejectCall(id: string): Promise<EngineCall> {
    const sock = await this.#open();
    return mapPlatformErrors(() => this.#calls.reject(sock, id), { now: this.#context.clock() });
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
  /**
   * The pair of a LID or phone (digits) from Baileys' mapping store, which may ask the platform (lids.ts); a pair
   * found is recorded as a `lid-mapping` event before this resolves (docs/decisions/0038-lid-mappings.md).
   * @throws DomainError not_logged_in / not_connected / platform_unreachable as every operation; platform errors.
   */
  async lidMapping(query: { lid: string } | { phone: string }): Promise<LidMapping | null> {
    const sock = await this.#open();
    const found = await mapPlatformErrors(() => lookupLidMapping(sock, query), {
      now: this.#context.clock(),
    });
    if (!found) return null;
    await this.#context.emit({ type: 'lid-mapping', mappings: [found] });
    this.#resolver.remember(`${found.lid}@lid`, userJid(found.phone), false);
    return found;
  }
  async createGroup(name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    return ops.createGroup(await this.#open(), this.#deps, name, participants);
  }
  async listGroups(): Promise<GroupInfo[]> {
    return ops.listGroups(await this.#open(), this.#deps);
  }
  async groupInfo(jid: Jid): Promise<GroupInfo> {
    return ops.groupInfo(await this.#open(), this.#deps, jid);
  }
  async groupInviteCode(jid: Jid): Promise<string> {
    return ops.groupInviteCode(await this.#open(), this.#deps, jid);
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

  async profile(): Promise<AccountProfile> {
    const sock = await this.#open();
    return mapPlatformErrors(() => profile.readProfile(sock, this.#ownAccount()), {
      now: this.#context.clock(),
    });
  }
  async updateProfile(change: ProfileChange): Promise<AccountProfile> {
    const sock = await this.#open();
    const rename = (name: string) => this.#life.rename(name);
    await mapPlatformErrors(() => profile.applyProfile(sock, this.#ownAccount(), change, rename), {
      now: this.#context.clock(),
    });
    return this.profile();
  }
  async privacy(): Promise<PrivacySettings> {
    const sock = await this.#open();
    return mapPlatformErrors(() => profile.readPrivacy(sock), { now: this.#context.clock() });
  }
  async updatePrivacy(change: PrivacyChange): Promise<PrivacySettings> {
    const sock = await this.#open();
    await mapPlatformErrors(() => profile.applyPrivacy(sock, change), { now: this.#context.clock() });
    return this.privacy();
  }
  async blocklist(): Promise<string[]> {
    const sock = await this.#open();
    return mapPlatformErrors(() => profile.readBlocklist(sock), { now: this.#context.clock() });
  }
  async setBlocked(phone: string, action: 'block' | 'unblock'): Promise<string[]> {
    const sock = await this.#open();
    await mapPlatformErrors(() => profile.applyBlock(sock, this.#ownAccount(), phone, action), {
      now: this.#context.clock(),
    });
    return this.blocklist();
  }

  /** Applies a chat action as an app state patch (docs/decisions/0043-chat-actions-and-star.md). */
  async chatAction(chat: Jid, action: ChatAction, last: readonly ChatMessageRef[]): Promise<void> {
    const sock = await this.#open();
    await mapPlatformErrors(() => chatActions.applyChatAction(sock, chat, action, last), {
      now: this.#context.clock(),
    });
  }
  /** Stars or unstars a message as an app state patch. */
  async starMessage(chat: Jid, message: { id: string; fromMe: boolean }, star: boolean): Promise<void> {
    const sock = await this.#open();
    await mapPlatformErrors(() => chatActions.starMessage(sock, chat, message, star), {
      now: this.#context.clock(),
    });
  }

  /** Whether the account is a business account, asked once per socket (labels.ts {@link labels.BusinessCheck}). */
  async isBusiness(): Promise<boolean> {
    const sock = await this.#open();
    return this.#business.ask(sock, this.#ownAccount().phone, this.#context.clock());
  }
  /** Sends a label change as an app state patch, then records it as a `label` event. */
  async editLabel(edit: LabelEdit): Promise<void> {
    const sock = await this.#open();
    const own = userJid(this.#ownAccount().phone);
    await mapPlatformErrors(() => labels.editLabel(sock, own, edit), { now: this.#context.clock() });
    await this.#context.emit({ type: 'label', label: edit });
  }
  /** Puts a label on a chat or takes it off as an app state patch, then records it as a `chat-label` event. */
  async labelChat(chat: Jid, label: Label, labeled: boolean): Promise<void> {
    const sock = await this.#open();
    await mapPlatformErrors(() => labels.labelChat(sock, chat, label.id, labeled), {
      now: this.#context.clock(),
    });
    await this.#context.emit({ type: 'chat-label', change: { chat, labelId: label.id, labeled } });
  }

  /**
   * Links by an 8-character code typed on the phone (Baileys `requestPairingCode`) during a running pairing
   * attempt. @throws DomainError conflict `already logged in` / `instance is not connected`.
   */
  async requestPairingCode(phone: string): Promise<string> {
    await this.#life.loadSummary();
    if (this.#life.state().loggedIn) throw errors.alreadyLoggedIn();
    const sock = this.#life.socket;
    if (!sock || (this.#life.phase !== 'pairing' && this.#life.phase !== 'connecting'))
      throw errors.notConnected();
    return mapPlatformErrors(async () => {
      await sock.waitForSocketOpen();
      return sock.requestPairingCode(phone);
    });
  }

  /**
   * The open socket for an operation. @throws DomainError not_logged_in `instance is not logged in` without paired credentials,
   * not_connected `instance is not connected` when disconnected or stopped (with the stop reason), 503 while reconnecting.
   */
  async #open(): Promise<SocketLike> {
    await this.#life.loadSummary();
    const state = this.#life.state();
    if (!state.loggedIn) throw errors.notLoggedIn();
    const sock = this.#life.openSocket;
    if (sock) return sock;
    const phase = this.#life.phase;
    const why = state.reason ? `: ${state.reason}` : '';
    if (phase === 'waiting' || phase === 'connecting') {
      throw new DomainError('platform_unreachable', `not connected to the platform right now${why}`);
    }
    throw new DomainError('not_connected', `instance is not connected${why}`);
  }

  /** The account's phone and push name, from the credentials. @throws DomainError not_logged_in without them. */
  #ownAccount(): profile.OwnAccount {
    const me = this.#life.creds?.me;
    const phone = me?.id ? jidDecode(me.id)?.user : undefined;
    if (!me || !phone) throw errors.notLoggedIn();
    return { phone, name: me.name ?? '' };
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

  #subscribePresence(sock: SocketLike, jid: Jid): void {
    if (this.#presence.get(jid)) return;
    this.#presence.set(jid, true);
    sock.presenceSubscribe(jid).catch((error: unknown) => {
      this.#context.logger.debug({ err: error }, 'presence subscription failed');
    });
  }
}
