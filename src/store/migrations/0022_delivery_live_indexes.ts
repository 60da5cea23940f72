import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * The webhook deliveries' claim indexes hold claimed rows only (docs/decisions/0061-claimed-delivery-index.md):
 * - `webhook_deliveries_in_flight` on (instance_id, endpoint_id, locked_at) becomes partial,
 *   `WHERE locked_at IS NOT NULL`: a delivery enters it when a worker claims it and leaves it when its claim ends,
 *   so queuing an event no longer writes an entry under a null `locked_at`, and the index's size follows the
 *   deliveries in flight, not the history. Every statement that reads it compares `locked_at` with `>=` or tests
 *   `IS NOT NULL`, which implies the predicate on SQLite and PostgreSQL, whether the value is bound or written.
 * - `webhook_deliveries_due` on (status, run_at) is dropped: the claim finds each lane's head through
 *   `webhook_deliveries_instance` and its rows by their key, and the plans that still chose this index (releasing a
 *   dead node's claims, pruning the log) read every pending row to find a few.
 * - `webhook_deliveries_locked_by` (PostgreSQL only: SQLite's table was rebuilt without it in 0017) is dropped:
 *   releasing a worker's claims reads the in-flight index instead, which holds exactly the locked rows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_in_flight').execute();
  await db.schema
    .createIndex('webhook_deliveries_in_flight')
    .on('webhook_deliveries')
    .columns(['instance_id', 'endpoint_id', 'locked_at'])
    .where(sql<boolean>`locked_at is not null`)
    .execute();
  await db.schema.dropIndex('webhook_deliveries_due').execute();
  await db.schema.dropIndex('webhook_deliveries_locked_by').ifExists().execute();
}

/** Back to the indexes of migrations 0008 (PostgreSQL) and 0017. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_in_flight').execute();
  await db.schema
    .createIndex('webhook_deliveries_in_flight')
    .on('webhook_deliveries')
    .columns(['instance_id', 'endpoint_id', 'locked_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .columns(['status', 'run_at'])
    .execute();
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await db.schema
      .createIndex('webhook_deliveries_locked_by')
      .on('webhook_deliveries')
      .column('locked_by')
      .execute();
  }
}
