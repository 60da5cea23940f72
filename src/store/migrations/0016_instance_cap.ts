import type { Kysely } from 'kysely';

/**
 * The plan's cap on instances (docs/decisions/0029-instances-over-the-api.md): an enterprise organization may carry
 * its own `max_instances` (instances per environment), like its own per-minute and per-day limits
 * (docs/decisions/0019-rate-limits-and-plans.md). Null: the plan's fixed cap (free 2, pro 20; enterprise unset: pro's).
 * Existing organizations keep null.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('organizations').addColumn('max_instances', 'integer').execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('organizations').dropColumn('max_instances').execute();
}
