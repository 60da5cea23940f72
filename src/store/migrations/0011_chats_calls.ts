import type { Kysely } from 'kysely';

/**
 * Chats, history and calls (docs/decisions/0026-chats-edits-polls-and-calls.md):
 * - `messages_chat_order` on (instance_id, chat, timestamp, id): a chat's history newest first with its
 *   (timestamp, id) cursor is an index range scan in that order on PostgreSQL and SQLite, and the per-chat
 *   "latest message" and unread-count subqueries of the chat list seek on it. It covers `messages_chat`
 *   (instance_id, chat, timestamp) of migration 0002, which is dropped.
 * - `call_settings`: one row per instance that set its call handling: `reject` 0/1 (reject incoming calls
 *   automatically) and `message` (text sent to the caller after an automatic reject; null for none).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('messages_chat_order')
    .on('messages')
    .columns(['instance_id', 'chat', 'timestamp', 'id'])
    .execute();
  await db.schema.dropIndex('messages_chat').execute();
  await db.schema
    .createTable('call_settings')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.primaryKey().references('instances.id').onDelete('cascade'),
    )
    .addColumn('reject', 'integer', (c) => c.notNull())
    .addColumn('message', 'text')
    .addColumn('updated_at', 'varchar(30)', (c) => c.notNull())
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('call_settings').execute();
  await db.schema
    .createIndex('messages_chat')
    .on('messages')
    .columns(['instance_id', 'chat', 'timestamp'])
    .execute();
  await db.schema.dropIndex('messages_chat_order').execute();
}
