import type { EngineCall } from '../../domain/calls.ts';
import type { Channel, ChannelRef } from '../../domain/channels.ts';
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
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../../domain/profile.ts';
import type { ChatAction, EngineSession, EngineSessionContext, SandboxControls } from '../engine.ts';
import { ACCOUNT_CATEGORY, type SandboxAccount } from './account.ts';
import { rejectCall, rememberedCalls } from './calls.ts';
import * as channels from './channels.ts';
import * as chatActions from './chat-actions.ts';
import { sandboxControls } from './controls.ts';
import * as admin from './group-admin.ts';
import * as groups from './groups.ts';
import { SequenceAllocator } from './ids.ts';
import * as labels from './labels.ts';
import { sandboxLidMapping } from './lids.ts';
import { SandboxLifecycle } from './lifecycle.ts';
import * as media from './media.ts';
import * as messaging from './messaging.ts';
import { OwnedAuthState } from './owned-state.ts';
import * as profile from './profile.ts';
import * as status from './status.ts';
import * as updates from './updates.ts';
import { avatarOf, checkOf, contactOf, infoOf } from './users.ts';
import { SandboxWorld, USERS } from './world.ts';

export type { SandboxCredentials } from './account.ts';

/**
 * One instance on the simulated platform (docs/decisions/0004-sandbox.md). Session lifecycle per docs/api.md#session
 * and docs/decisions/0016-session-lifecycle.md, kept by lifecycle.ts (connection phase, pairing, credentials). Every
 * platform operation requires the account logged in and connected (409 otherwise,
 * docs/decisions/0001-envelope-and-error-codes.md) and is delegated to the module that simulates its family. The
 * simulated world (defined users, groups, the id sequence) lives in the auth port and is read on demand; while the
 * session runs it keeps the user definitions and the account's own state it read or wrote (owned-state.ts, at most
 * 256 entries). Logout deletes the credentials but not the world.
 */
export class SandboxSession implements EngineSession {
  readonly #context: EngineSessionContext;
  /** Connection phase, pairing and stored credentials (lifecycle.ts). */
  readonly #lifecycle: SandboxLifecycle;
  readonly #world: SandboxWorld;
  /** The instance's auth port, keeping the session's own categories in memory. */
  readonly #owned: OwnedAuthState;
  readonly #sequence: SequenceAllocator;
  /** Phones whose LID this session told the account (lids.ts). */
  readonly #revealedLids = new Set<string>();
  /** This session's calls by id, with their last status (calls.ts). */
  readonly #calls = rememberedCalls();

  constructor(context: EngineSessionContext) {
    // The simulated world's users and the account's own state are kept as read and written (owned-state.ts).
    this.#owned = new OwnedAuthState(context.auth, [USERS, ACCOUNT_CATEGORY]);
    this.#context = {
      ...context,
      auth: this.#owned,
      // What it writes is kept as `set` keeps it, once committed with its events.
      emitWith: (entries, events) =>
        this.#owned.writeThrough(entries, () => context.emitWith(entries, events)),
    };
    this.#world = new SandboxWorld(this.#owned, this.#owned);
    this.#sequence = new SequenceAllocator(context.auth);
    this.#lifecycle = new SandboxLifecycle(this.#context);
  }

  connect(): Promise<void> {
    return this.#lifecycle.connect();
  }
  waitForLogin(timeoutMs: number): Promise<boolean> {
    return this.#lifecycle.waitForLogin(timeoutMs);
  }
  state(): ConnectionState {
    return this.#lifecycle.state();
  }
  pairingCode(): PairingCode | null {
    return this.#lifecycle.pairingCode();
  }
  disconnect(): Promise<void> {
    return this.#lifecycle.disconnect();
  }
  logout(): Promise<void> {
    return this.#lifecycle.logout();
  }
  async close(): Promise<void> {
    this.#owned.forget();
    this.#lifecycle.close();
  }

  async messageId(): Promise<string> {
    await this.#account.ready();
    return messaging.newMessageId(this.#account);
  }
  send(message: OutgoingMessage): Promise<SentMessage> {
    return messaging.send(this.#account, message);
  }
  react(chat: Jid, targetId: string, _fromMe: boolean, emoji: string): Promise<SentMessage> {
    return messaging.react(this.#account, chat, targetId, emoji);
  }
  markRead(chat: Jid, ids: readonly string[], sender?: Jid): Promise<void> {
    return messaging.markRead(this.#account, chat, ids, sender);
  }
  edit(chat: Jid, id: string, text: string): Promise<SentMessage> {
    return updates.edit(this.#account, chat, id, text);
  }
  revoke(chat: Jid, id: string): Promise<SentMessage> {
    return updates.revoke(this.#account, chat, id);
  }
  sendPresence(chat: Jid, state: ChatPresenceState): Promise<void> {
    return updates.sendPresence(this.#account, chat, state);
  }
  async checkPhones(phones: readonly string[]): Promise<UserCheck[]> {
    await this.#lifecycle.ready();
    const users = await this.#world.users(phones);
    return users.map((user, i) => checkOf(phones[i] ?? user.phone, user));
  }
  async userInfo(phones: readonly string[]): Promise<UserInfo[]> {
    await this.#lifecycle.ready();
    const users = await this.#world.users(phones);
    return users.map((user, i) => infoOf(phones[i] ?? user.phone, user));
  }
  async avatar(phone: string): Promise<Avatar | null> {
    await this.#lifecycle.ready();
    return avatarOf(await this.#world.user(phone));
  }
  async contacts(): Promise<Contact[]> {
    await this.#lifecycle.ready();
    const users = await this.#world.definedUsers();
    return users.filter((user) => user.registered).map(contactOf);
  }
  createGroup(name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    return groups.createGroup(this.#account, name, participants);
  }
  listGroups(): Promise<GroupInfo[]> {
    return groups.listGroups(this.#account);
  }
  groupInfo(jid: Jid): Promise<GroupInfo> {
    return groups.groupInfo(this.#account, jid);
  }
  groupInviteCode(jid: Jid): Promise<string> {
    return groups.groupInviteCode(this.#account, jid);
  }
  updateParticipants(
    jid: Jid,
    action: ParticipantAction,
    participants: readonly Jid[],
  ): Promise<ParticipantOutcome[]> {
    return admin.updateParticipants(this.#account, jid, action, participants);
  }
  updateGroup(jid: Jid, change: GroupChange): Promise<void> {
    return admin.updateGroup(this.#account, jid, change);
  }
  leaveGroup(jid: Jid): Promise<void> {
    return admin.leaveGroup(this.#account, jid);
  }
  joinGroup(code: string): Promise<Jid> {
    return admin.joinGroup(this.#account, code);
  }
  revokeGroupInvite(jid: Jid): Promise<string> {
    return admin.revokeGroupInvite(this.#account, jid);
  }
  /** The channels the account follows (channels.ts). */
  listChannels(): Promise<Channel[]> {
    return channels.listChannels(this.#account);
  }
  /** Follows a sandbox channel (channels.ts). */
  followChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(this.#account, ref, true);
  }
  /** Stops following a sandbox channel (channels.ts). */
  unfollowChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(this.#account, ref, false);
  }
  /** Declines a ringing sandbox call (calls.ts `rejectCall`). */
  rejectCall(id: string): Promise<EngineCall> {
    return rejectCall(this.#account, id);
  }
  /**
   * The file of a sandbox media message (media.ts); past its link's expiry the sender's phone uploads it again,
   * which needs the instance connected (docs/decisions/0046-media-re-upload.md).
   */
  downloadMedia(message: EngineMessage, maxBytes: number): Promise<AsyncIterable<Buffer>> {
    return media.downloadMedia(this.#context, message, maxBytes, async () => {
      await this.#lifecycle.ready();
    });
  }
  /**
   * The pair of a registered simulated user, by LID or phone (lids.ts); null when none. A pair found is emitted
   * as a `lid-mapping` event (recorded before this resolves).
   */
  async lidMapping(query: { lid: string } | { phone: string }): Promise<LidMapping | null> {
    await this.#lifecycle.ready();
    const found = await sandboxLidMapping(this.#account, query);
    if (found) {
      await this.#context.emit({ type: 'lid-mapping', mappings: [found] });
      this.#revealedLids.add(found.phone);
    }
    return found;
  }

  /** The account's profile (docs/decisions/0039-profile-privacy-blocklist.md). */
  profile(): Promise<AccountProfile> {
    return profile.profile(this.#account);
  }
  /** Applies the change; a new name is also the push name of the stored credentials (the session status shows it). */
  async updateProfile(change: ProfileChange): Promise<AccountProfile> {
    const updated = await profile.updateProfile(this.#account, change);
    if (change.name !== undefined) await this.#lifecycle.rename(change.name);
    return updated;
  }
  privacy(): Promise<PrivacySettings> {
    return profile.privacy(this.#account);
  }
  updatePrivacy(change: PrivacyChange): Promise<PrivacySettings> {
    return profile.updatePrivacy(this.#account, change);
  }
  blocklist(): Promise<string[]> {
    return profile.blocklist(this.#account);
  }
  setBlocked(phone: string, action: 'block' | 'unblock'): Promise<string[]> {
    return profile.setBlocked(this.#account, phone, action);
  }

  /** Applies a chat action to the account's chat state (docs/decisions/0043-chat-actions-and-star.md). */
  async chatAction(chat: Jid, action: ChatAction): Promise<void> {
    await chatActions.applyChatAction(this.#account, chat, action);
  }
  /** Stars or unstars message `message.id` in the account's chat state. */
  async starMessage(_chat: Jid, message: { id: string; fromMe: boolean }, star: boolean): Promise<void> {
    await chatActions.starMessage(this.#account, message.id, star);
  }
  /** The account's chat state as the simulated platform keeps it (tests read it). */
  chatsState(): Promise<chatActions.SandboxChatsState> {
    return chatActions.chatsState(this.#account);
  }

  /**
   * The statuses the account posted, oldest first; with `phone`, those that reached that simulated contact
   * (status.ts, docs/decisions/0044-status-stories.md).
   */
  statuses(phone?: string): Promise<status.SandboxStatus[]> {
    return status.statuses(this.#account, phone);
  }

  /** Whether the account is a business account (labels.ts: its number defined with a verified name). */
  isBusiness(): Promise<boolean> {
    return labels.isBusiness(this.#account);
  }
  /** Changes a label of the account (docs/decisions/0045-business-labels.md). */
  editLabel(edit: LabelEdit): Promise<void> {
    return labels.editLabel(this.#account, edit);
  }
  /** Puts a label on a chat or takes it off. */
  labelChat(chat: Jid, label: Label, labeled: boolean): Promise<void> {
    return labels.labelChat(this.#account, { chat, labelId: label.id, labeled });
  }
  /** The account's labels as the simulated platform keeps them (tests read it). */
  labelsState(): Promise<labels.SandboxLabelsState> {
    return labels.labelsState(this.#account);
  }

  /** The simulated platform's test helpers (docs/decisions/0004-sandbox.md); a light object made on each read. */
  get sandbox(): SandboxControls {
    return sandboxControls(this.#account, this.#world, (input) =>
      this.#lifecycle.scan(input, (phone) => labels.replayLabels(this.#account, phone)),
    );
  }

  /** The view of this session the operations in `messaging.ts` and `groups.ts` work on. */
  get #account(): SandboxAccount {
    return {
      context: this.#context,
      world: this.#world,
      sequence: this.#sequence,
      ready: () => this.#lifecycle.ready(),
      revealedLids: this.#revealedLids,
      calls: this.#calls,
    };
  }
}
