import type { Kysely } from 'kysely';

/**
 * The node registry (Graphile Worker's model of worker ids with heartbeats): every parley process registers a row
 * under an id random per boot (the value it writes into `webhook_deliveries.locked_by`), with its host name and
 * process id, and renews `heartbeat_at` (epoch ms) periodically. A process whose row stops being renewed, or a
 * predecessor on the same host whose process id is gone, is dead: its claims are released at once instead of
 * after the stale-claim timeout. Several nodes sharing PostgreSQL (docs/decisions/0008-leases-and-fencing.md) build
 * on the same table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('nodes')
    .addColumn('id', 'varchar(100)', (c) => c.primaryKey())
    .addColumn('host', 'varchar(255)', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('heartbeat_at', 'bigint', (c) => c.notNull())
    .execute();
  // Claims are released by owner: a seek on locked_by instead of a scan of the queue.
  await db.schema
    .createIndex('webhook_deliveries_locked_by')
    .on('webhook_deliveries')
    .column('locked_by')
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_locked_by').execute();
  await db.schema.dropTable('nodes').execute();
}
