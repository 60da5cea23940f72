import type { Kysely } from 'kysely';

/**
 * Rate-limit windows kept across restarts (docs/decisions/0019-rate-limits-and-plans.md, embedded default without
 * Redis): one row per counted window and key (`day:<quota>:<orgId>:<env>`), with the requests consumed in it and when
 * it resets (epoch ms). Written in batches by `src/ratelimit/persisted-window.ts`, read once per key after a boot.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rate_limit_windows')
    .addColumn('key', 'varchar(200)', (c) => c.primaryKey())
    .addColumn('consumed', 'integer', (c) => c.notNull())
    .addColumn('reset_at', 'bigint', (c) => c.notNull())
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('rate_limit_windows').execute();
}
