import type { Kysely } from 'kysely';

/**
 * Idempotency keys (docs/decisions/0010-idempotency.md): one row per (organization, environment, key) claimed by a
 * `POST` that carried `Idempotency-Key`. The primary key makes the claim one atomic insert shared by every node on
 * the same store. While the first request runs the row holds its claim `token` and `locked_until` (epoch ms; a
 * claim past it was left by a process that died and may be taken over); once it answered below 500 the row keeps
 * the answer (`status`, `content_type`, `body`) until `expires_at` (epoch ms, 24 h), when a periodic job deletes it.
 * Same DDL on SQLite and PostgreSQL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('org_id', 'varchar(36)', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('env', 'varchar(10)', (c) => c.notNull())
    .addColumn('key', 'varchar(255)', (c) => c.notNull())
    .addColumn('fingerprint', 'varchar(64)', (c) => c.notNull())
    .addColumn('token', 'varchar(36)', (c) => c.notNull())
    .addColumn('locked_until', 'bigint', (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('content_type', 'varchar(200)')
    .addColumn('body', 'text')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['org_id', 'env', 'key'])
    .execute();
  await db.schema
    .createIndex('idempotency_keys_expires_at')
    .on('idempotency_keys')
    .column('expires_at')
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
}
