import type { Kysely } from 'kysely';

/**
 * The message store (docs/decisions/0017-messages-and-media.md): every sent and received message of an instance with
 * its delivery state, and the people the instance exchanged messages with (the contacts list's "known from messages"
 * part, docs/decisions/0004-sandbox.md). Booleans are integers 0/1 and times RFC 3339 text on both SQLite and
 * PostgreSQL (docs/decisions/0024-engines-and-data-flow.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('messages')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('id', 'varchar(128)', (c) => c.notNull())
    .addColumn('chat', 'varchar(160)', (c) => c.notNull())
    .addColumn('sender', 'varchar(160)', (c) => c.notNull())
    .addColumn('from_me', 'integer', (c) => c.notNull())
    .addColumn('is_group', 'integer', (c) => c.notNull())
    .addColumn('type', 'varchar(20)', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('push_name', 'varchar(200)', (c) => c.notNull())
    .addColumn('timestamp', 'varchar(30)', (c) => c.notNull())
    .addColumn('state', 'varchar(10)', (c) => c.notNull())
    .addColumn('state_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addPrimaryKeyConstraint('messages_pk', ['instance_id', 'id'])
    .execute();
  await db.schema
    .createIndex('messages_chat')
    .on('messages')
    .columns(['instance_id', 'chat', 'timestamp'])
    .execute();

  await db.schema
    .createTable('chat_peers')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('jid', 'varchar(160)', (c) => c.notNull())
    .addColumn('push_name', 'varchar(200)', (c) => c.notNull())
    .addColumn('first_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('last_at', 'varchar(30)', (c) => c.notNull())
    .addPrimaryKeyConstraint('chat_peers_pk', ['instance_id', 'jid'])
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('chat_peers').execute();
  await db.schema.dropTable('messages').execute();
}
