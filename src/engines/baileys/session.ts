import type { Agent } from 'node:https';
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
import type { AccountOperations } from './account-operations.ts';
import { avatarOf, type ContactBook, checkPhones, userInfo } from './contacts.ts';
import { mapPlatformErrors } from './errors.ts';
import * as admin from './group-admin.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { IncomingQueue } from './listeners.ts';
import {
  downloadPlatformMedia,
  MediaLinkGone,
  movedMediaReference,
  parseMediaReference,
} from './media-download.ts';
import { MEDIA_REUPLOAD_TIMEOUT_MS, REUPLOAD_STATUSES, requestMediaReupload } from './media-reupload.ts';
import * as ops from './operations.ts';
import type { BaileysSessionOptions, SessionCaches } from './session-options.ts';
import { type SessionStop, sessionParts } from './session-parts.ts';
import type { SocketLike } from './socket.ts';
import { requestPairingCode } from './socket-access.ts';
import * as updates from './updates.ts';

/**
 * One live instance (docs/decisions/0025-live-engine.md): the socket lifecycle (`Lifecycle`), the translation of
 * Baileys events into domain events, and the operations of docs/api.md. Incoming events are mapped and emitted one at
 * a time in arrival order. Every cache is bounded (`BoundedCache`, `JidResolver`) and the socket's listeners are
 * removed when it ends. Its parts are built and wired by session-parts.ts.
 */
export class BaileysSession implements EngineSession {
  readonly #context: EngineSessionContext;
  readonly #life: Lifecycle;
  readonly #contacts: ContactBook;
  readonly #caches: SessionCaches;
  readonly #deps: ops.OperationDeps;
  readonly #queue: IncomingQueue;
  readonly #mediaAgent: Agent | undefined;
  readonly #reuploadTimeoutMs: number;
  /** The operations on the account's own state (account-operations.ts). */
  readonly #account: AccountOperations;
  /** The open socket for an operation (socket-access.ts, `operationSocket`). */
  readonly #open: () => Promise<SocketLike>;
  /** The session's stop signal (session-parts.ts `SessionStop`). */
  readonly #stopping: SessionStop;

  constructor(sessionContext: EngineSessionContext, options: BaileysSessionOptions) {
    const parts = sessionParts(sessionContext, options);
    this.#context = parts.context;
    this.#life = parts.life;
    this.#contacts = parts.contacts;
    this.#caches = parts.caches;
    this.#deps = parts.deps;
    this.#queue = parts.queue;
    this.#account = parts.account;
    this.#open = parts.open;
    this.#stopping = parts.stopping;
    this.#mediaAgent = options.mediaAgent;
    this.#reuploadTimeoutMs = options.mediaReuploadTimeoutMs ?? MEDIA_REUPLOAD_TIMEOUT_MS;
  }

  connect(): Promise<void> {
    this.#stopping.renew();
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
    this.#stopping.stop();
    return this.#life.disconnect();
  }
  async logout(): Promise<void> {
    this.#stopping.stop();
    await this.#life.logout();
    for (const cache of this.#caches.all) cache.flushAll();
  }
  /**
   * Ends the session at shutdown or hand-over: the incoming work under way stops waiting on the platform at once
   * ({@link SessionStop}), the socket is closed (Lifecycle.close), and the events queued are recorded first.
   */
  async close(options?: CloseOptions): Promise<void> {
    this.#stopping.stop();
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
    return this.#contacts.list(this.#deps.mapping);
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
}
