import { jidDecode } from 'baileys';
import type { EngineCall } from '../../domain/calls.ts';
import type { Channel, ChannelRef } from '../../domain/channels.ts';
import { errors } from '../../domain/errors.ts';
import type { Label, LabelEdit } from '../../domain/labels.ts';
import type { LidMapping } from '../../domain/lids.ts';
import type { Jid } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../../domain/profile.ts';
import type {
  AccountCapability,
  CallsCapability,
  ChannelsCapability,
  ChatAction,
  ChatActionsCapability,
  ChatMessageRef,
  EngineSessionContext,
  LabelsCapability,
  LidCapability,
} from '../engine.ts';
import type { CallHandler } from './calls.ts';
import * as channels from './channels.ts';
import * as chatActions from './chat-actions.ts';
import { mapPlatformErrors } from './errors.ts';
import type { JidResolver } from './jid.ts';
import * as labels from './labels.ts';
import { lookupLidMapping } from './lids.ts';
import type { Lifecycle } from './lifecycle.ts';
import * as profile from './profile.ts';
import type { SocketLike } from './socket.ts';

/** What {@link AccountOperations} takes from its session (session.ts `BaileysSession`). */
export interface AccountOperationsDeps {
  context: EngineSessionContext;
  /** The session's socket lifecycle: the credentials (`creds.me`) and the push name change (`rename`). */
  life: Lifecycle;
  /** The session's JID resolver, told of the LID pairs a lookup finds. */
  resolver: JidResolver;
  /** The session's calls, for declining a ringing one. */
  calls: CallHandler;
  /**
   * The open socket for an operation (session-parts.ts `open`). @throws DomainError not_logged_in / not_connected /
   * platform_unreachable.
   */
  open: () => Promise<SocketLike>;
  /** Resolves once the platform events the session received so far are recorded (its `IncomingQueue.drained`). */
  recorded: () => Promise<void>;
}

/**
 * The live session's operations on the account's own state (the optional capabilities of src/engines/capabilities.ts):
 * profile, privacy and blocklist (profile.ts), chat actions and stars (chat-actions.ts), business labels (labels.ts),
 * channels (channels.ts), declining calls (calls.ts) and LID lookups (lids.ts). Each opens the session's socket first,
 * so it raises what every operation raises, and maps platform errors (errors.ts `mapPlatformErrors`). The session
 * (session.ts) delegates to the one its parts hold (session-parts.ts).
 */
export class AccountOperations
  implements
    AccountCapability,
    ChatActionsCapability,
    LabelsCapability,
    ChannelsCapability,
    CallsCapability,
    LidCapability
{
  readonly #deps: AccountOperationsDeps;
  /** Whether the account is a business account (docs/decisions/0045-business-labels.md). */
  readonly #business = new labels.BusinessCheck();
  /** Whether the account's labels were synced in full on the current socket (labels.ts {@link labels.LabelSync}). */
  readonly #labelSync = new labels.LabelSync();

  /** An object over the session's parts; cheap, no I/O. */
  constructor(deps: AccountOperationsDeps) {
    this.#deps = deps;
  }

  /** The channels the account follows (channels.ts). */
  async listChannels(): Promise<Channel[]> {
    return channels.listChannels(await this.#deps.open());
  }
  /** Follows a channel (channels.ts). */
  async followChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(await this.#deps.open(), ref, true);
  }
  /** Stops following a channel (channels.ts). */
  async unfollowChannel(ref: ChannelRef): Promise<Channel> {
    return channels.setFollowing(await this.#deps.open(), ref, false);
  }
  /** Declines a ringing call (calls.ts `CallHandler.reject`). */
  async rejectCall(id: string): Promise<EngineCall> {
    const sock = await this.#deps.open();
    return mapPlatformErrors(() => this.#deps.calls.reject(sock, id), { now: this.#now() });
  }

  /**
   * The pair of a LID or phone (digits) from Baileys' mapping store, which may ask the platform (lids.ts); a pair
   * found is recorded as a `lid-mapping` event before this resolves (docs/decisions/0038-lid-mappings.md).
   * @throws DomainError not_logged_in / not_connected / platform_unreachable as every operation; platform errors.
   */
  async lidMapping(query: { lid: string } | { phone: string }): Promise<LidMapping | null> {
    const sock = await this.#deps.open();
    const found = await mapPlatformErrors(() => lookupLidMapping(sock, query), {
      now: this.#now(),
    });
    if (!found) return null;
    await this.#deps.context.emit({ type: 'lid-mapping', mappings: [found] });
    this.#deps.resolver.remember(`${found.lid}@lid`, userJid(found.phone), false);
    return found;
  }

  /** The account's profile (profile.ts `readProfile`). */
  async profile(): Promise<AccountProfile> {
    const sock = await this.#deps.open();
    return mapPlatformErrors(() => profile.readProfile(sock, this.#ownAccount()), {
      now: this.#now(),
    });
  }
  /** Applies a profile change (profile.ts `applyProfile`) and reads the profile back. */
  async updateProfile(change: ProfileChange): Promise<AccountProfile> {
    const sock = await this.#deps.open();
    const rename = (name: string) => this.#deps.life.rename(name);
    await mapPlatformErrors(() => profile.applyProfile(sock, this.#ownAccount(), change, rename), {
      now: this.#now(),
    });
    return this.profile();
  }
  /** The account's privacy settings (profile.ts `readPrivacy`). */
  async privacy(): Promise<PrivacySettings> {
    const sock = await this.#deps.open();
    return mapPlatformErrors(() => profile.readPrivacy(sock), { now: this.#now() });
  }
  /** Applies a privacy change (profile.ts `applyPrivacy`) and reads the settings back. */
  async updatePrivacy(change: PrivacyChange): Promise<PrivacySettings> {
    const sock = await this.#deps.open();
    await mapPlatformErrors(() => profile.applyPrivacy(sock, change), { now: this.#now() });
    return this.privacy();
  }
  /** The account's blocklist (profile.ts `readBlocklist`). */
  async blocklist(): Promise<string[]> {
    const sock = await this.#deps.open();
    return mapPlatformErrors(() => profile.readBlocklist(sock), { now: this.#now() });
  }
  /** Blocks or unblocks a user (profile.ts `applyBlock`) and reads the blocklist back. */
  async setBlocked(phone: string, action: 'block' | 'unblock'): Promise<string[]> {
    const sock = await this.#deps.open();
    await mapPlatformErrors(() => profile.applyBlock(sock, this.#ownAccount(), phone, action), {
      now: this.#now(),
    });
    return this.blocklist();
  }

  /** Applies a chat action as an app state patch (docs/decisions/0043-chat-actions-and-star.md). */
  async chatAction(chat: Jid, action: ChatAction, last: readonly ChatMessageRef[]): Promise<void> {
    const sock = await this.#deps.open();
    await mapPlatformErrors(() => chatActions.applyChatAction(sock, chat, action, last), {
      now: this.#now(),
    });
  }
  /** Stars or unstars a message as an app state patch. */
  async starMessage(chat: Jid, message: { id: string; fromMe: boolean }, star: boolean): Promise<void> {
    const sock = await this.#deps.open();
    await mapPlatformErrors(() => chatActions.starMessage(sock, chat, message, star), {
      now: this.#now(),
    });
  }

  /** Whether the account is a business account, asked once per socket (labels.ts {@link labels.BusinessCheck}). */
  async isBusiness(): Promise<boolean> {
    const sock = await this.#deps.open();
    return this.#business.ask(sock, this.#ownAccount().phone, this.#now());
  }
  /** Syncs the account's labels in full once per socket (labels.ts {@link labels.LabelSync}). */
  async syncLabels(): Promise<void> {
    await this.#labelSync.ensure(await this.#deps.open(), this.#deps.recorded);
  }
  /** Sends a label change as an app state patch, then records it as a `label` event. */
  async editLabel(edit: LabelEdit): Promise<void> {
    const sock = await this.#deps.open();
    const own = userJid(this.#ownAccount().phone);
    await mapPlatformErrors(() => labels.editLabel(sock, own, edit), { now: this.#now() });
    await this.#deps.context.emit({ type: 'label', label: edit });
  }
  /** Puts a label on a chat or takes it off as an app state patch, then records it as a `chat-label` event. */
  async labelChat(chat: Jid, label: Label, labeled: boolean): Promise<void> {
    const sock = await this.#deps.open();
    await mapPlatformErrors(() => labels.labelChat(sock, chat, label.id, labeled), {
      now: this.#now(),
    });
    await this.#deps.context.emit({ type: 'chat-label', change: { chat, labelId: label.id, labeled } });
  }

  /** The session clock's now, epoch ms, for `mapPlatformErrors`. */
  #now(): number {
    return this.#deps.context.clock();
  }

  /** The account's phone and push name, from the credentials. @throws DomainError not_logged_in without them. */
  #ownAccount(): profile.OwnAccount {
    const me = this.#deps.life.creds?.me;
    const phone = me?.id ? jidDecode(me.id)?.user : undefined;
    if (!me || !phone) throw errors.notLoggedIn();
    return { phone, name: me.name ?? '' };
  }
}
