import type { Kysely } from 'kysely';

/**
 * Sends as jobs (docs/decisions/0009-sends-as-jobs.md, 0013-pacing.md):
 * - `send_jobs`: one row per message-creating send, written before anything reaches the platform. The key is the
 *   platform message id the job was given at acceptance; every relay attempt reuses it. `seq` orders an
 *   instance's jobs in acceptance order; `run_at` (epoch ms) is when it may go (its `sendAt`, or acceptance).
 *   `status`: pending → sending (claimed by `locked_by`, `attempts` counted at claim) → sent | failed | canceled.
 *   `payload` is the message to relay (JSON, media bytes base64). `mode` is `sync` (a request waits for it) or
 *   `async` (202 Queued). `new_chat` is 1 when the relay opened a chat (counted by the new-chats-per-day pace).
 * - `send_pacing`: per instance, the pace (`min_interval_ms`, `jitter_ms`, `new_chats_per_day`) and the pause a
 *   platform restriction signal set (`paused_reason`, `paused_until` epoch ms).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('send_jobs')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('id', 'varchar(128)', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('chat', 'varchar(200)', (c) => c.notNull())
    .addColumn('kind', 'varchar(20)', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('mode', 'varchar(10)', (c) => c.notNull())
    .addColumn('status', 'varchar(10)', (c) => c.notNull())
    .addColumn('run_at', 'bigint', (c) => c.notNull())
    .addColumn('send_at', 'bigint')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    .addColumn('last_error', 'text')
    .addColumn('locked_by', 'varchar(100)')
    .addColumn('locked_at', 'bigint')
    .addColumn('new_chat', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('sent_at', 'bigint')
    .addPrimaryKeyConstraint('send_jobs_pk', ['instance_id', 'id'])
    .execute();
  await db.schema
    .createIndex('send_jobs_due')
    .on('send_jobs')
    .columns(['instance_id', 'status', 'run_at', 'seq'])
    .execute();
  await db.schema
    .createTable('send_pacing')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.primaryKey().references('instances.id').onDelete('cascade'),
    )
    .addColumn('min_interval_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('jitter_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('new_chats_per_day', 'integer')
    .addColumn('paused_reason', 'text')
    .addColumn('paused_until', 'bigint')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('send_pacing').execute();
  await db.schema.dropIndex('send_jobs_due').execute();
  await db.schema.dropTable('send_jobs').execute();
}
