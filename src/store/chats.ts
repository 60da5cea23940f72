import { type Kysely, sql } from 'kysely';
import type { Jid } from '../domain/messages.ts';
import { type StoredMessage, toStoredMessage } from './messages.ts';
import type { Database, MessagesTable } from './schema.ts';

/**
 * Chats and history read from the message store (DESIGN D8): a chat is every chat JID the instance has a stored
 * message in. Order keys are the message's `timestamp` (RFC 3339 text of fixed width, so text order is time
 * order on both dialects) with a tie-breaker: the message id in a chat's history, the chat JID in the chat list.
 */

/** Where a page of a chat's history starts: strictly older than this message's (timestamp, id). */
export interface HistoryPosition {
  timestamp: string;
  id: string;
}

/** Where a page of the chat list starts: chats whose latest message is strictly before (timestamp, chat). */
export interface ChatPosition {
  timestamp: string;
  chat: Jid;
}

/** One chat of the list: its JID, its latest message, the peer's display name ('' when none) and unread count. */
export interface ChatSummary {
  jid: Jid;
  name: string;
  last: StoredMessage;
  /** See {@link unreadCounts}. */
  unread: number;
}

/**
 * Messages of `chat`, newest first, ties by id descending, at most `limit`, starting strictly after `before`
 * (the last message of the previous page). Uses the index `messages_chat_order` (migration 0013).
 */
export async function listHistory(
  db: Kysely<Database>,
  instanceId: string,
  chat: Jid,
  limit: number,
  before?: HistoryPosition,
): Promise<StoredMessage[]> {
  let query = db
    .selectFrom('messages')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('chat', '=', chat);
  if (before) {
    query = query.where((eb) =>
      eb.or([
        eb('timestamp', '<', before.timestamp),
        eb.and([eb('timestamp', '=', before.timestamp), eb('id', '<', before.id)]),
      ]),
    );
  }
  const rows = await query.orderBy('timestamp', 'desc').orderBy('id', 'desc').limit(limit).execute();
  return rows.map(toStoredMessage);
}

/**
 * The instance's chats, the one with the newest latest message first (ties by chat JID descending), at most
 * `limit`, starting strictly after `after` (the last chat of the previous page). A chat's latest message is its
 * greatest (timestamp, id). The display name is the peer's stored push name for a one-to-one chat, '' for groups.
 */
export async function listChats(
  db: Kysely<Database>,
  instanceId: string,
  limit: number,
  after?: ChatPosition,
): Promise<ChatSummary[]> {
  const ranked = db
    .selectFrom('messages')
    .selectAll()
    .select(sql<number>`row_number() over (partition by chat order by timestamp desc, id desc)`.as('rank'))
    .where('instance_id', '=', instanceId)
    .as('ranked');
  let query = db
    .selectFrom(ranked)
    .leftJoin('chat_peers', (join) =>
      join.on('chat_peers.instance_id', '=', instanceId).onRef('chat_peers.jid', '=', 'ranked.chat'),
    )
    .selectAll('ranked')
    .select('chat_peers.push_name as peer_name')
    .where('ranked.rank', '=', 1);
  if (after) {
    query = query.where((eb) =>
      eb.or([
        eb('ranked.timestamp', '<', after.timestamp),
        eb.and([eb('ranked.timestamp', '=', after.timestamp), eb('ranked.chat', '<', after.chat)]),
      ]),
    );
  }
  const rows = await query
    .orderBy('ranked.timestamp', 'desc')
    .orderBy('ranked.chat', 'desc')
    .limit(limit)
    .execute();
  const unread = await unreadCounts(
    db,
    instanceId,
    rows.map((row) => row.chat),
  );
  return rows.map((row) => {
    const { rank: _rank, peer_name, ...message } = row;
    return {
      jid: row.chat,
      name: peer_name ?? '',
      last: toStoredMessage(message as MessagesTable),
      unread: unread.get(row.chat) ?? 0,
    };
  });
}

/**
 * Unread messages per chat of `chats`: messages from others (not reactions) still `delivered` whose timestamp is
 * strictly later than the newest message from others the instance marked read (state `read` or `played`,
 * set by `POST /v1/messages/read`); every such message when none was marked read. Marking a message read
 * therefore also clears the earlier ones, as on the platform. Chats without unread messages are absent.
 */
export async function unreadCounts(
  db: Kysely<Database>,
  instanceId: string,
  chats: readonly Jid[],
): Promise<Map<Jid, number>> {
  if (chats.length === 0) return new Map();
  const rows = await db
    .selectFrom('messages as m')
    .select(['m.chat', (eb) => eb.fn.countAll<number | string>().as('unread')])
    .where('m.instance_id', '=', instanceId)
    .where('m.chat', 'in', [...chats])
    .where('m.from_me', '=', 0)
    .where('m.type', '<>', 'reaction')
    .where('m.state', '=', 'delivered')
    .where((eb) =>
      eb(
        'm.timestamp',
        '>',
        eb.fn.coalesce(
          eb
            .selectFrom('messages as r')
            .select((r) => r.fn.max('r.timestamp').as('marker'))
            .where('r.instance_id', '=', instanceId)
            .whereRef('r.chat', '=', 'm.chat')
            .where('r.from_me', '=', 0)
            .where('r.state', 'in', ['read', 'played']),
          sql.lit(''),
        ),
      ),
    )
    .groupBy('m.chat')
    .execute();
  return new Map(rows.map((row) => [row.chat, Number(row.unread)]));
}
