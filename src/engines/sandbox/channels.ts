import type { Channel, ChannelRef } from '../../domain/channels.ts';
import { errors } from '../../domain/errors.ts';
import type { SandboxAccount } from './account.ts';

/**
 * Channels on the simulated platform (docs/decisions/0041-forward-calls-channels.md): a fixed catalogue every sandbox
 * instance sees, and which of them the account follows (auth-port category `sandbox-channel`, one entry per followed
 * JID, kept like the rest of the simulated world across restarts and logout).
 */

const FOLLOWED = 'sandbox-channel';

/**
 * The sandbox's channels: JID, name, description, invite code and the followers it has besides the account
 * (docs/api.md#channels lists them).
 */
export const SANDBOX_CHANNELS: readonly (Channel & { invite: string; subscribers: number })[] = [
  {
    jid: '120363000000000001@newsletter',
    name: 'Parley News',
    description: 'Releases and tips',
    invite: '0029VaParleyNews0000000001',
    subscribers: 1250,
  },
  {
    jid: '120363000000000002@newsletter',
    name: 'Weather Today',
    description: 'A forecast every morning',
    invite: '0029VaWeatherToday00000002',
    subscribers: 48210,
  },
  {
    jid: '120363000000000003@newsletter',
    name: 'Quiet Channel',
    invite: '0029VaQuietChannel00000003',
    subscribers: 3,
  },
];

function find(ref: ChannelRef) {
  const channel = SANDBOX_CHANNELS.find((c) => ('jid' in ref ? c.jid === ref.jid : c.invite === ref.invite));
  if (!channel) throw errors.notFound('channel not found');
  return channel;
}

async function followed(account: SandboxAccount): Promise<Set<string>> {
  return new Set((await account.context.auth.list(FOLLOWED)).keys());
}

/** A catalogue channel as answered: one more follower while the account follows it. */
function view(channel: (typeof SANDBOX_CHANNELS)[number], following: boolean): Channel {
  return { ...channel, subscribers: channel.subscribers + (following ? 1 : 0) };
}

/** The channels the account follows, in catalogue order. @throws not_logged_in / not_connected. */
export async function listChannels(account: SandboxAccount): Promise<Channel[]> {
  await account.ready();
  const mine = await followed(account);
  return SANDBOX_CHANNELS.filter((c) => mine.has(c.jid)).map((c) => view(c, true));
}

/** Follows (or, with `follow` false, unfollows) channel `ref`. @throws not_found `channel not found`. */
export async function setFollowing(
  account: SandboxAccount,
  ref: ChannelRef,
  follow: boolean,
): Promise<Channel> {
  await account.ready();
  const channel = find(ref);
  await account.context.auth.set([{ category: FOLLOWED, id: channel.jid, value: follow ? '1' : null }]);
  return view(channel, follow);
}
