import type { Kysely } from 'kysely';

/**
 * Dashboard sign-in (docs/decisions/0022-dashboard.md): `dashboard_users` holds one row per person who signs in to
 * the web UI, each in one organization with a role (`owner` | `member` | `viewer`) and an Argon2id password hash (PHC
 * string); `dashboard_sessions` one row per signed-in browser, keyed by the SHA-256 of the session id the cookie
 * carries (the id itself is never stored), with its CSRF token and its expiry (epoch ms). Removing a user removes its
 * sessions (the service deletes them in the same transaction).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('dashboard_users')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('org_id', 'varchar(36)', (c) => c.notNull().references('organizations.id'))
    .addColumn('email', 'varchar(320)', (c) => c.notNull().unique())
    .addColumn('password_hash', 'varchar(255)', (c) => c.notNull())
    .addColumn('role', 'varchar(10)', (c) => c.notNull())
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('last_sign_in_at', 'varchar(30)')
    .execute();
  await db.schema
    .createTable('dashboard_sessions')
    .addColumn('id_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('user_id', 'varchar(36)', (c) => c.notNull().references('dashboard_users.id'))
    .addColumn('csrf_token', 'varchar(64)', (c) => c.notNull())
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dashboard_sessions_user').on('dashboard_sessions').column('user_id').execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('dashboard_sessions').execute();
  await db.schema.dropTable('dashboard_users').execute();
}
