import type { Kysely } from 'kysely';

/**
 * An index for the claim's "is a delivery of this instance in flight?" test (`src/store/delivery-claims.ts`): a
 * seek on (instance, locked_at) instead of a scan over every pending delivery of the instance, which made each
 * claim cost O(backlog) on PostgreSQL (measured: 92 ms per claim over a 20,000-event backlog).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('webhook_deliveries_in_flight')
    .on('webhook_deliveries')
    .columns(['instance_id', 'locked_at'])
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_in_flight').execute();
}
