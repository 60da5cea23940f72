import type { Kysely } from 'kysely';

/** Index for the delivery log's retention (`pruneWebhookLog`): old events are found by creation time. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('webhook_events_created').on('webhook_events').column('created_at').execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_events_created').execute();
}
