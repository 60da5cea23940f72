import { type BinaryNode, getBinaryNodeChild, S_WHATSAPP_NET } from 'baileys';
import type { Channel, ChannelRef } from '../../domain/channels.ts';
import { DomainError, errors } from '../../domain/errors.ts';
import { mapPlatformErrors } from './errors.ts';
import type { SocketLike } from './socket.ts';

/**
 * Channels (newsletters) on a live instance (docs/decisions/0041-forward-calls-channels.md), through Baileys 7's
 * newsletter socket (Socket/newsletter.js): `newsletterMetadata('invite' | 'jid', key)`, `newsletterFollow(jid)`,
 * `newsletterUnfollow(jid)`, each a `w:mex` query. Baileys 7 has no call listing the followed channels; the
 * platform's own query for it is `w:mex` query id {@link SUBSCRIBED_CHANNELS_QUERY} answering
 * `xwa2_newsletter_subscribed` (an array of the same metadata objects), which parley sends with `sock.query` the way
 * Baileys' Socket/mex.js builds its queries.
 */

/** The platform's `w:mex` query id listing the followed channels (data path `xwa2_newsletter_subscribed`). */
export const SUBSCRIBED_CHANNELS_QUERY = '6388546374527196';

type Text = string | { text?: string | null } | null | undefined;

/** The newsletter metadata the platform answers (GraphQL shape; Baileys passes it on unparsed). */
interface RawChannel {
  id?: string;
  name?: Text;
  description?: Text;
  invite?: string;
  subscribers?: number | string;
  thread_metadata?: {
    name?: Text;
    description?: Text;
    invite?: string;
    subscribers_count?: string | number;
  } | null;
}

const textOf = (value: Text): string | undefined =>
  typeof value === 'string' ? value : (value?.text ?? undefined) || undefined;

/** A channel of the platform's metadata object; null when it has no id. Pure. */
export function channelOf(raw: unknown): Channel | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const value = raw as RawChannel;
  if (typeof value.id !== 'string' || value.id === '') return null;
  const thread = value.thread_metadata ?? {};
  const name = textOf(thread.name) ?? textOf(value.name) ?? '';
  const description = textOf(thread.description) ?? textOf(value.description);
  const invite = thread.invite ?? value.invite;
  const count = Number(thread.subscribers_count ?? value.subscribers);
  return {
    jid: value.id,
    name,
    ...(description === undefined ? {} : { description }),
    ...(Number.isFinite(count) && (thread.subscribers_count ?? value.subscribers) !== undefined
      ? { subscribers: count }
      : {}),
    ...(invite ? { invite } : {}),
  };
}

/**
 * Channel `ref` as the platform describes it (Baileys `newsletterMetadata`).
 * @throws DomainError not_found `channel not found`; platform errors mapped (errors.ts).
 */
export async function channelMetadata(sock: SocketLike, ref: ChannelRef): Promise<Channel> {
  const raw = await mapPlatformErrors(
    () =>
      'jid' in ref ? sock.newsletterMetadata('jid', ref.jid) : sock.newsletterMetadata('invite', ref.invite),
    { notFound: 'channel not found' },
  );
  const channel = channelOf(raw);
  if (!channel) throw errors.notFound('channel not found');
  return channel;
}

/**
 * Follows or unfollows channel `ref` (Baileys `newsletterFollow` / `newsletterUnfollow`), then reads it again so the
 * answer carries the follower count after the change.
 * @throws DomainError not_found `channel not found`; platform errors mapped.
 */
export async function setFollowing(sock: SocketLike, ref: ChannelRef, follow: boolean): Promise<Channel> {
  const channel = await channelMetadata(sock, ref);
  await mapPlatformErrors(
    () => (follow ? sock.newsletterFollow(channel.jid) : sock.newsletterUnfollow(channel.jid)),
    { notFound: 'channel not found' },
  );
  return channelMetadata(sock, { jid: channel.jid });
}

/**
 * The channels the account follows: the platform's `xwa2_newsletter_subscribed` query.
 * @throws DomainError platform_refused when the answer holds errors or no list; platform errors mapped.
 */
export async function listChannels(sock: SocketLike): Promise<Channel[]> {
  const iq: BinaryNode = {
    tag: 'iq',
    attrs: { type: 'get', to: S_WHATSAPP_NET, xmlns: 'w:mex' },
    content: [
      {
        tag: 'query',
        attrs: { query_id: SUBSCRIBED_CHANNELS_QUERY },
        content: Buffer.from(JSON.stringify({ variables: {} })),
      },
    ],
  };
  const answer = await mapPlatformErrors(() => sock.query(iq));
  const result = getBinaryNodeChild(answer, 'result');
  const body = result?.content instanceof Uint8Array ? Buffer.from(result.content).toString('utf8') : '';
  let parsed: { data?: { xwa2_newsletter_subscribed?: unknown }; errors?: { message?: string }[] } = {};
  try {
    parsed = body === '' ? {} : JSON.parse(body);
  } catch {
    parsed = {};
  }
  const list = parsed.data?.xwa2_newsletter_subscribed;
  if (!Array.isArray(list)) {
    const why = parsed.errors?.[0]?.message ?? 'no channel list in the answer';
    throw new DomainError('platform_refused', `the platform refused the request (${why})`);
  }
  return list.map(channelOf).filter((c): c is Channel => c !== null);
}
