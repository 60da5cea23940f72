import type { Kysely } from 'kysely';

/**
 * Webhook outbox, delivery queue and delivery log (docs/decisions/0005-outbox-and-delivery.md). Same DDL on SQLite
 * and PostgreSQL.
 *
 * - `webhook_state`: one row per instance that ever produced an event: the last `sequence` handed out (the row
 *   lock of the upsert serialises concurrent writers on PostgreSQL) and whether a 410 Gone disabled the webhook.
 * - `webhook_events`: every normalised event with its exact body text (the signed bytes, identical on retries);
 *   written in the transaction that records the engine event, whether or not it is sent.
 * - `webhook_deliveries`: the queue, one row per event that is to be sent (Graphile-Worker shape: `run_at` and
 *   `locked_at` in epoch milliseconds, `attempts`, `max_attempts`, `last_error`, `locked_by`).
 * - `webhook_attempts`: one row per HTTP attempt, written when the attempt is claimed (so an attempt cut short by a
 *   crash stays visible) and completed with status, duration, error and the first 2 KB of the response.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_state')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.primaryKey().references('instances.id').onDelete('cascade'),
    )
    .addColumn('last_sequence', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('disabled_at', 'varchar(30)')
    .addColumn('disabled_reason', 'text')
    .execute();

  await db.schema
    .createTable('webhook_events')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('type', 'varchar(20)', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('skip_reason', 'text')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addUniqueConstraint('webhook_events_instance_sequence', ['instance_id', 'sequence'])
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('event_id', 'varchar(36)', (c) =>
      c.primaryKey().references('webhook_events.id').onDelete('cascade'),
    )
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('status', 'varchar(12)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    .addColumn('run_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_by', 'varchar(100)')
    .addColumn('locked_at', 'bigint')
    .addColumn('last_error', 'text')
    .addColumn('last_status', 'integer')
    .addColumn('delivered_at', 'varchar(30)')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('updated_at', 'varchar(30)', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .columns(['status', 'run_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_instance')
    .on('webhook_deliveries')
    .columns(['instance_id', 'status', 'sequence'])
    .execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('event_id', 'varchar(36)', (c) =>
      c.notNull().references('webhook_events.id').onDelete('cascade'),
    )
    .addColumn('number', 'integer', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('worker', 'varchar(100)', (c) => c.notNull())
    .addColumn('attempted_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('finished_at', 'varchar(30)')
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer')
    .addColumn('error', 'text')
    .addColumn('response_body', 'text')
    .addColumn('response_truncated', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('webhook_attempts_event')
    .on('webhook_attempts')
    .columns(['event_id', 'number'])
    .execute();
}

/** Drops the webhook tables (newest first). */
export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_events', 'webhook_state']) {
    await db.schema.dropTable(table).execute();
  }
}
