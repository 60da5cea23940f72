/**
 * The channel (newsletter) `w:mex` queries Baileys 7 sends (Socket/newsletter.js, query ids in Types/Mex.js), answered
 * from the simulator's channels (model/newsletters.ts) as `<result>` holding `{"data":{"<path>":…}}`:
 * - METADATA `6563316087068696` (`variables.input = { key, type: "INVITE" | "JID" }`) → `xwa2_newsletter`: the
 *   channel's metadata (`id`, `state`, `thread_metadata` with `name.text`, `description.text`, `invite`,
 *   `subscribers_count`, `creation_time`, `verification`; `viewer_metadata` with `mute` and `role`), or null for an
 *   unknown channel (Baileys then answers null);
 * - FOLLOW `24404358912487870` → `xwa2_newsletter_join_v2`, UNFOLLOW `9767147403369991` →
 *   `xwa2_newsletter_leave_v2` (`variables.newsletter_id`): `{ id }`, or a GraphQL error with `error_code` 404 for
 *   an unknown channel;
 * - the followed list, `6388546374527196` → `xwa2_newsletter_subscribed`: the metadata of every channel the account
 *   follows (the platform's query; Baileys 7 has no wrapper for it).
 * Other query ids: undefined (the caller answers the rest).
 */
import { type BinaryNode, getBinaryNodeChild } from 'baileys';
import type { Accounts, User } from '../model/accounts.ts';
import { newslettersOf, type SimChannel } from '../model/newsletters.ts';

const METADATA = '6563316087068696';
const FOLLOW = '24404358912487870';
const UNFOLLOW = '9767147403369991';
const SUBSCRIBED = '6388546374527196';

function metadata(channel: SimChannel, viewer: string): Record<string, unknown> {
  return {
    id: channel.jid,
    state: { type: 'ACTIVE' },
    thread_metadata: {
      creation_time: String(channel.createdAt),
      name: { text: channel.name },
      description: { text: channel.description ?? '' },
      invite: channel.invite,
      subscribers_count: String(channel.followers.size),
      verification: 'UNVERIFIED',
    },
    viewer_metadata: { mute: 'OFF', role: channel.followers.has(viewer) ? 'SUBSCRIBER' : 'GUEST' },
  };
}

const result = (body: unknown): BinaryNode[] => [
  { tag: 'result', attrs: {}, content: Buffer.from(JSON.stringify(body)) },
];

const notFound = () =>
  result({ errors: [{ message: 'Channel not found', extensions: { error_code: 404 } }] });

/** The `<result>` of a channel `w:mex` query from `user`, or undefined for another query. */
export function answerNewsletterMex(
  iq: BinaryNode,
  accounts: Accounts,
  user: User,
): BinaryNode[] | undefined {
  const query = getBinaryNodeChild(iq, 'query');
  const id = query?.attrs.query_id;
  if (id !== METADATA && id !== FOLLOW && id !== UNFOLLOW && id !== SUBSCRIBED) return undefined;
  let variables: { newsletter_id?: string; input?: { key?: string; type?: string } } = {};
  try {
    const raw = query?.content;
    const text = raw instanceof Uint8Array ? Buffer.from(raw).toString('utf8') : '';
    variables = (JSON.parse(text) as { variables?: typeof variables }).variables ?? {};
  } catch {
    return result({ errors: [{ message: 'Bad request', extensions: { error_code: 400 } }] });
  }
  const channels = newslettersOf(accounts);
  switch (id) {
    case METADATA: {
      const key = variables.input?.key ?? '';
      const channel = variables.input?.type === 'INVITE' ? channels.byInvite(key) : channels.byJid(key);
      return result({ data: { xwa2_newsletter: channel ? metadata(channel, user.phone) : null } });
    }
    case FOLLOW:
    case UNFOLLOW: {
      const channel = channels.byJid(variables.newsletter_id ?? '');
      if (!channel) return notFound();
      if (id === FOLLOW) channel.followers.add(user.phone);
      else channel.followers.delete(user.phone);
      const path = id === FOLLOW ? 'xwa2_newsletter_join_v2' : 'xwa2_newsletter_leave_v2';
      return result({ data: { [path]: { id: channel.jid } } });
    }
    default:
      return result({
        data: {
          xwa2_newsletter_subscribed: channels.followedBy(user.phone).map((c) => metadata(c, user.phone)),
        },
      });
  }
}
