import type { Kysely } from 'kysely';

/**
 * Seen gateway request signatures (docs/decisions/0021-gateway-form.md replay protection): one row per (instance,
 * signature) until the signature's timestamp leaves the ±300 s window (`expires_at`, RFC 3339 text). The primary key
 * makes the "first time seen?" check one atomic insert shared by every process on the same store. Same DDL on SQLite
 * and PostgreSQL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('gateway_replay')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('signature', 'varchar(64)', (c) => c.notNull())
    .addColumn('expires_at', 'varchar(30)', (c) => c.notNull())
    .addPrimaryKeyConstraint('gateway_replay_pk', ['instance_id', 'signature'])
    .execute();
  await db.schema
    .createIndex('gateway_replay_expires_at')
    .on('gateway_replay')
    .column('expires_at')
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('gateway_replay').execute();
}
