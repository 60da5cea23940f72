import { type Kysely, sql } from 'kysely';

/**
 * A group member's LID, once its pair is kept, names the member no more (docs/decisions/0038-lid-mappings.md): the
 * recorder now renames a LID sender to the pair's phone JID in the transaction that stores the pair, and makes the
 * user of a moved LID chat or a renamed member a chat peer under the phone JID with the name its messages carried
 * (src/store/lid-moves.ts `moveLidChatMessages`). Versions before kept a group message's LID sender (group history
 * named the member by LID though its number was known), and moved a LID chat without its user's name (the chat list
 * showed none until the user wrote again). This migration:
 * - creates `messages_lid_senders` on (instance_id, sender) `WHERE sender LIKE '%@lid'`: the rows still naming a LID
 *   sender, which the recorder finds by it (a partial index: the other rows cost it nothing);
 * - makes the user of each kept pair a chat peer under its phone JID from the rows that would have made one: its
 *   group messages with its LID as sender (not the account's own), and its one-to-one chat under the phone JID (moved
 *   there by migration 0033 or the recorder). A missing peer row is created; a kept one keeps a name it has, else
 *   takes the one of the user's latest named message, and its first and last times widen to the rows' recording
 *   times;
 * - renames every LID sender whose pair is kept to the pair's phone JID.
 * Written here, not imported: a migration never changes once shipped.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_lid_senders')
    .on('messages')
    .columns(['instance_id', 'sender'])
    .where(sql<boolean>`sender like '%@lid'`)
    .execute();
  const peerConflict = sql`on conflict (instance_id, jid) do update set
    push_name = case when chat_peers.push_name = '' then excluded.push_name else chat_peers.push_name end,
    first_at = case when excluded.first_at < chat_peers.first_at then excluded.first_at else chat_peers.first_at end,
    last_at = case when excluded.last_at > chat_peers.last_at then excluded.last_at else chat_peers.last_at end`;
  // Members named by LID in groups, per instance and number (a number may have had several LIDs).
  await sql`
    insert into chat_peers (instance_id, jid, push_name, first_at, last_at)
    select m.instance_id, k.phone || '@s.whatsapp.net',
      coalesce((
        select n.push_name from messages n
        join lid_mappings nk on nk.instance_id = n.instance_id and n.sender = nk.lid || '@lid'
        where n.instance_id = m.instance_id and nk.phone = k.phone and n.sender like '%@lid'
          and n.is_group = 1 and n.from_me = 0 and n.push_name <> ''
        order by n.timestamp desc limit 1
      ), ''),
      min(m.created_at), max(m.created_at)
    from messages m
    join lid_mappings k on k.instance_id = m.instance_id and m.sender = k.lid || '@lid'
    where m.sender like '%@lid' and m.is_group = 1 and m.from_me = 0
    group by m.instance_id, k.phone
    ${peerConflict}`.execute(db);
  // The users of the one-to-one chats under the phone JIDs of kept pairs.
  await sql`
    insert into chat_peers (instance_id, jid, push_name, first_at, last_at)
    select k.instance_id, k.jid,
      coalesce((
        select m.push_name from messages m
        where m.instance_id = k.instance_id and m.chat = k.jid and m.from_me = 0 and m.push_name <> ''
        order by m.timestamp desc limit 1
      ), ''),
      (select min(m.created_at) from messages m where m.instance_id = k.instance_id and m.chat = k.jid),
      (select max(m.created_at) from messages m where m.instance_id = k.instance_id and m.chat = k.jid)
    from (select distinct instance_id, phone || '@s.whatsapp.net' as jid from lid_mappings) k
    where exists (select 1 from messages m where m.instance_id = k.instance_id and m.chat = k.jid)
    ${peerConflict}`.execute(db);
  await sql`
    update messages set sender = (
      select m.phone from lid_mappings m
      where m.instance_id = messages.instance_id and m.lid = substr(messages.sender, 1, length(messages.sender) - 4)
    ) || '@s.whatsapp.net'
    where sender like '%@lid' and exists (
      select 1 from lid_mappings m
      where m.instance_id = messages.instance_id and m.lid = substr(messages.sender, 1, length(messages.sender) - 4)
    )`.execute(db);
}

/** Drops the index; the renamed senders and the peers stay (the phone JID names the same user). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_lid_senders').execute();
}
