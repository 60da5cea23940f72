import type { Kysely } from 'kysely';

/**
 * One-socket lock per instance (docs/decisions/0025-live-engine.md): the live engine holds a row here while it has a
 * socket open on the instance's credentials, renews `expires_at` on a heartbeat and releases it on disconnect; a
 * second process sees the live row and refuses to open a second socket (two sockets on one credential corrupt the
 * signal sessions). An expired row may be taken over. Same DDL on SQLite and PostgreSQL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instance_locks')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.primaryKey().references('instances.id').onDelete('cascade'),
    )
    .addColumn('owner', 'varchar(200)', (c) => c.notNull())
    .addColumn('acquired_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('expires_at', 'varchar(30)', (c) => c.notNull())
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('instance_locks').execute();
}
