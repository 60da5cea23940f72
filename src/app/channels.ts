import { CHANNEL_JID, type Channel, type ChannelRef, channelInviteCode } from '../domain/channels.ts';
import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { SessionManager } from '../sessions/manager.ts';

/** What a follow or unfollow names: a channel JID or an invite (code or link), exactly one. */
export interface ChannelInput {
  jid?: string | undefined;
  invite?: string | undefined;
}

/**
 * Channels (newsletters) the instance follows (docs/decisions/0041-forward-calls-channels.md): listed, followed and
 * unfollowed on the platform through the engine; parley stores nothing about them. Every method needs the instance
 * logged in and connected (@throws DomainError not_logged_in / not_connected).
 */
export class ChannelService {
  readonly #sessions: SessionManager;

  constructor(deps: { sessions: SessionManager }) {
    this.#sessions = deps.sessions;
  }

  /** The channels the instance follows, as the platform lists them. */
  async list(instance: Instance): Promise<Channel[]> {
    const session = this.#session(instance);
    return session.listChannels ? session.listChannels() : [];
  }

  /**
   * Follows the channel named by `input` (idempotent) and answers it with its follower count after the change.
   * @throws DomainError invalid (see {@link refOf}); not_found `channel not found`.
   */
  async follow(instance: Instance, input: ChannelInput): Promise<Channel> {
    const ref = refOf(input);
    const session = this.#session(instance);
    if (!session.followChannel) throw errors.notFound('channel not found');
    return session.followChannel(ref);
  }

  /** Stops following the channel named by `input` (idempotent). @throws as {@link ChannelService.follow}. */
  async unfollow(instance: Instance, input: ChannelInput): Promise<Channel> {
    const ref = refOf(input);
    const session = this.#session(instance);
    if (!session.unfollowChannel) throw errors.notFound('channel not found');
    return session.unfollowChannel(ref);
  }

  #session(instance: Instance): EngineSession {
    return this.#sessions.ready(instance);
  }
}

/**
 * The channel reference of a body: `jid` (`<digits>@newsletter`) or `invite` (a code or a
 * `https://whatsapp.com/channel/<code>` link), exactly one.
 * @throws DomainError invalid `jid or invite is required`, `give jid or invite, not both`, `jid must be a channel
 *   JID, <digits>@newsletter`, `invite must be a channel invite code or a https://whatsapp.com/channel/<code> link`.
 */
export function refOf(input: ChannelInput): ChannelRef {
  const { jid, invite } = input;
  if (jid !== undefined && invite !== undefined) throw errors.badRequest('give jid or invite, not both');
  if (jid !== undefined) {
    if (!CHANNEL_JID.test(jid)) throw errors.badRequest('jid must be a channel JID, <digits>@newsletter');
    return { jid };
  }
  if (invite === undefined) throw errors.badRequest('jid or invite is required');
  const code = channelInviteCode(invite);
  if (code === null) {
    throw errors.badRequest(
      'invite must be a channel invite code or a https://whatsapp.com/channel/<code> link',
    );
  }
  return { invite: code };
}
