import { type Kysely, sql } from 'kysely';

/**
 * The messages kept under a LID chat (`<digits>@lid`) whose pair `lid_mappings` already holds move to the pair's
 * phone JID (`<phone>@s.whatsapp.net`), sender too where it was the LID (docs/decisions/0038-lid-mappings.md: once
 * parley knows a LID's number, the chat is the phone JID's). Versions before this one left them under the LID, where
 * no chat route could read them once the pair was known (the routes name such a chat by its phone JID), and where
 * receipts, edits and deletions naming the phone JID did not find them; from now on the recorder moves a LID chat's
 * messages in the transaction that stores its pair (src/store/messages.ts `moveLidChatMessages`). One statement over
 * the rows whose chat ends in `@lid`; the `sender` is set from the row's values before the update, on both stores.
 * Group messages keep their sender. Written here, not imported: a migration never changes once shipped.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    update messages set
      sender = case when sender = chat then (
        select m.phone from lid_mappings m
        where m.instance_id = messages.instance_id and m.lid = substr(messages.chat, 1, length(messages.chat) - 4)
      ) || '@s.whatsapp.net' else sender end,
      chat = (
        select m.phone from lid_mappings m
        where m.instance_id = messages.instance_id and m.lid = substr(messages.chat, 1, length(messages.chat) - 4)
      ) || '@s.whatsapp.net'
    where chat like '%@lid' and exists (
      select 1 from lid_mappings m
      where m.instance_id = messages.instance_id and m.lid = substr(messages.chat, 1, length(messages.chat) - 4)
    )`.execute(db);
}

/** Nothing to undo: which rows were under a LID is not kept, and the phone JID names the same chat. */
export async function down(_db: Kysely<unknown>): Promise<void> {}
