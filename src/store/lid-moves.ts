import { type Kysely, sql } from 'kysely';
import { LID_DOMAIN, type LidMapping, lidJid } from '../domain/lids.ts';
import { type Jid, userJid } from '../domain/messages.ts';
import type { Database } from './schema.ts';

/**
 * What the message store does when an instance learns a LID's phone number (docs/decisions/0038-lid-mappings.md):
 * the LID's chat moves to the phone JID, the LID as a sender (a group member) is renamed to it, and the user becomes
 * a chat peer under the phone JID with the display name its messages carried. Run in the transaction that stores
 * the pair (src/events/message-projection.ts). Times are epoch ms (docs/decisions/0027-times-as-epoch-ms.md).
 */

/** Most rows one statement of {@link moveLidChatMessages} moves or renames (a chat may hold many thousands). */
export const MOVE_BATCH = 1_000;

/** Most LIDs one look-up of {@link moveLidChatMessages} names: well under both stores' parameter limits. */
const MOVE_LOOKUP_CHUNK = 500;

/**
 * `sender like '%@lid'` with the pattern written into the statement's text, not bound: the predicate of the partial
 * index `messages_lid_senders` (migration 0035), which SQLite and PostgreSQL use only for a statement that states it
 * as written.
 */
const LID_SENDER = sql<boolean>`sender like ${sql.lit(`%@${LID_DOMAIN}`)}`;

/**
 * A user a move made a chat peer of (`chat_peers`, docs/decisions/0004-sandbox.md): the display name of its latest
 * named message (`nameAt` its timestamp; '' and -Infinity when none was named), and the first and last recording
 * times of the moved rows.
 */
interface MovedPeer {
  name: string;
  nameAt: number;
  firstAt: number;
  lastAt: number;
}

/**
 * Moves what `instanceId` stores under a LID of a pair of `mappings` to that pair's phone JID
 * (docs/decisions/0038-lid-mappings.md): once parley knows the number, the chat is the phone JID's, where later
 * messages, receipts, edits and the chat routes find it, and so is the user.
 * - The messages of the LID chat (`<lid>@lid`) move to the phone JID; a moved message whose sender was the LID gets
 *   the phone JID as sender too (the user's own messages in the chat); the account's own keep theirs.
 * - The messages of other chats whose sender is the LID (a group member's, found by the partial index
 *   `messages_lid_senders`, migration 0035) get the phone JID as sender, so group history names the member by
 *   number.
 * - The user becomes a chat peer under the phone JID, as a message stored under it would have made them (the chat's
 *   user; a group member whose message is not the account's own): the peer row is created when missing, its name
 *   set from the latest message of the user that carried one when it has none (a name it has is kept), and its
 *   first and last times widened to the moved rows' recording times.
 * Ids are unique per instance, so nothing conflicts; a LID named twice keeps its last pair. Idempotent: a LID with
 * no rows left costs its look-ups only. One look-up of the LID chats and one of the LID senders per 500 pairs, then
 * per LID found two reads for its peer and updates of at most `batch` rows each (default {@link MOVE_BATCH}) until
 * none is left, and one upsert of the peers, all in the caller's transaction, so a LID moves whole or not at all.
 * @returns rows moved or renamed.
 * @throws RangeError when `batch` is not a whole number of at least 1; the store's error (the caller's transaction
 *   then rolls back).
 */
export async function moveLidChatMessages(
  db: Kysely<Database>,
  instanceId: string,
  mappings: readonly LidMapping[],
  batch: number = MOVE_BATCH,
): Promise<number> {
  if (!Number.isInteger(batch) || batch < 1)
    throw new RangeError(`batch must be a whole number ≥ 1: ${batch}`);
  const phoneOf = new Map<Jid, Jid>();
  for (const { lid, phone } of mappings) phoneOf.set(lidJid(lid), userJid(phone));
  const lids = [...phoneOf.keys()];
  const peers = new Map<Jid, MovedPeer>();
  let changed = 0;
  for (let start = 0; start < lids.length; start += MOVE_LOOKUP_CHUNK) {
    const chunk = lids.slice(start, start + MOVE_LOOKUP_CHUNK);
    const chats = await db
      .selectFrom('messages')
      .select('chat')
      .distinct()
      .where('instance_id', '=', instanceId)
      .where('chat', 'in', chunk)
      .execute();
    for (const { chat: lid } of chats) {
      const phone = phoneOf.get(lid);
      if (phone === undefined) continue;
      mergePeer(peers, phone, await peerOfRows(db, instanceId, { chat: lid }));
      changed += await moveChat(db, instanceId, lid, phone, batch);
    }
    const senders = await db
      .selectFrom('messages')
      .select('sender')
      .distinct()
      .where('instance_id', '=', instanceId)
      .where(LID_SENDER)
      .where('sender', 'in', chunk)
      .execute();
    for (const { sender: lid } of senders) {
      const phone = phoneOf.get(lid);
      if (phone === undefined) continue;
      mergePeer(peers, phone, await peerOfRows(db, instanceId, { sender: lid }));
      changed += await renameSender(db, instanceId, lid, phone, batch);
    }
  }
  await upsertMovedPeers(db, instanceId, peers);
  return changed;
}

/** Moves the rows of chat `lid` to `phone` (sender too where it was the LID), `batch` rows a statement. */
async function moveChat(
  db: Kysely<Database>,
  instanceId: string,
  lid: Jid,
  phone: Jid,
  batch: number,
): Promise<number> {
  return inBatches(batch, () =>
    db
      .updateTable('messages')
      .set((eb) => ({
        chat: phone,
        sender: eb.case().when('sender', '=', lid).then(phone).else(eb.ref('sender')).end(),
      }))
      .where('instance_id', '=', instanceId)
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('messages')
          .select('id')
          .where('instance_id', '=', instanceId)
          .where('chat', '=', lid)
          .limit(batch),
      )
      .executeTakeFirst(),
  );
}

/** Names sender `lid` by `phone` in every row left with it (other chats than its own), `batch` rows a statement. */
async function renameSender(
  db: Kysely<Database>,
  instanceId: string,
  lid: Jid,
  phone: Jid,
  batch: number,
): Promise<number> {
  return inBatches(batch, () =>
    db
      .updateTable('messages')
      .set({ sender: phone })
      .where('instance_id', '=', instanceId)
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('messages')
          .select('id')
          .where('instance_id', '=', instanceId)
          .where(LID_SENDER)
          .where('sender', '=', lid)
          .limit(batch),
      )
      .executeTakeFirst(),
  );
}

/**
 * Runs `update` (one statement changing at most `batch` rows) until a run changes fewer than `batch` rows.
 * @returns the rows changed in all
 */
async function inBatches(batch: number, update: () => Promise<{ numUpdatedRows: bigint }>): Promise<number> {
  let changed = 0;
  for (;;) {
    const count = Number((await update()).numUpdatedRows);
    changed += count;
    if (count < batch) return changed;
  }
}

/**
 * The peer the rows about to move make of their user, or undefined when they make none: for chat `lid`, every row
 * (the chat's user is the peer, as src/events/message-projection.ts `peerOf` has it); for sender `lid`, its group
 * messages that are not the account's own. The name is the one of the latest such row from the user that carried
 * one. Two statements.
 */
async function peerOfRows(
  db: Kysely<Database>,
  instanceId: string,
  rows: { chat: Jid } | { sender: Jid },
): Promise<MovedPeer | undefined> {
  const base = () => {
    const query = db.selectFrom('messages').where('instance_id', '=', instanceId);
    return 'chat' in rows
      ? query.where('chat', '=', rows.chat)
      : query
          .where(LID_SENDER)
          .where('sender', '=', rows.sender)
          .where('is_group', '=', 1)
          .where('from_me', '=', 0);
  };
  const times = await base()
    .select((eb) => [eb.fn.min('created_at').as('first_at'), eb.fn.max('created_at').as('last_at')])
    .executeTakeFirst();
  if (times?.first_at === null || times?.first_at === undefined || times.last_at === null) return undefined;
  const named = await base()
    .select(['push_name', 'timestamp'])
    .where('from_me', '=', 0)
    .where('push_name', '<>', '')
    .orderBy('timestamp', 'desc')
    .limit(1)
    .executeTakeFirst();
  return {
    name: named?.push_name ?? '',
    nameAt: named === undefined ? Number.NEGATIVE_INFINITY : Number(named.timestamp),
    firstAt: Number(times.first_at),
    lastAt: Number(times.last_at),
  };
}

/** Adds `peer` to `peers` under `jid`: the later name, the earlier first and the later last time. */
function mergePeer(peers: Map<Jid, MovedPeer>, jid: Jid, peer: MovedPeer | undefined): void {
  if (peer === undefined) return;
  const known = peers.get(jid);
  if (known === undefined) {
    peers.set(jid, peer);
    return;
  }
  const later = peer.nameAt > known.nameAt ? peer : known;
  peers.set(jid, {
    name: later.name,
    nameAt: later.nameAt,
    firstAt: Math.min(known.firstAt, peer.firstAt),
    lastAt: Math.max(known.lastAt, peer.lastAt),
  });
}

/** Most peers one upsert of {@link upsertMovedPeers} writes (5 parameters each). */
const PEER_CHUNK = 500;

/**
 * Writes `peers` of `instanceId` to `chat_peers`: a missing row is created; a kept row keeps a name it has (else takes
 * the peer's), and its first and last times widen to the peer's. One statement per 500 peers.
 */
async function upsertMovedPeers(
  db: Kysely<Database>,
  instanceId: string,
  peers: ReadonlyMap<Jid, MovedPeer>,
): Promise<void> {
  const rows = [...peers].map(([jid, peer]) => ({
    instance_id: instanceId,
    jid,
    push_name: peer.name,
    first_at: peer.firstAt,
    last_at: peer.lastAt,
  }));
  for (let start = 0; start < rows.length; start += PEER_CHUNK) {
    await db
      .insertInto('chat_peers')
      .values(rows.slice(start, start + PEER_CHUNK))
      .onConflict((oc) =>
        oc.columns(['instance_id', 'jid']).doUpdateSet({
          push_name: sql<string>`case when chat_peers.push_name = '' then excluded.push_name else chat_peers.push_name end`,
          first_at: sql<number>`case when excluded.first_at < chat_peers.first_at then excluded.first_at else chat_peers.first_at end`,
          last_at: sql<number>`case when excluded.last_at > chat_peers.last_at then excluded.last_at else chat_peers.last_at end`,
        }),
      )
      .execute();
  }
}
