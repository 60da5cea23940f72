import type { Kysely } from 'kysely';

/** Organizations, instances, API keys and engine credentials (docs/decisions/0003-scopes-and-keys.md). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('organizations')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('name', 'varchar(200)', (c) => c.notNull().unique())
    .addColumn('plan', 'varchar(20)', (c) => c.notNull())
    .addColumn('per_minute', 'integer')
    .addColumn('per_day', 'integer')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('instances')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('org_id', 'varchar(36)', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('env', 'varchar(4)', (c) => c.notNull())
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('phone', 'varchar(20)')
    .addColumn('jid', 'varchar(120)')
    .addColumn('push_name', 'varchar(200)')
    .addColumn('webhook_url', 'text')
    .addColumn('subscribe', 'text')
    .addColumn('hmac_key', 'text')
    .addColumn('desired_state', 'varchar(20)', (c) => c.notNull().defaultTo('disconnected'))
    .addColumn('last_connected_at', 'varchar(30)')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('instances_org_env').on('instances').columns(['org_id', 'env']).execute();
  await db.schema.createIndex('instances_phone').on('instances').columns(['env', 'phone']).execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
    .addColumn('org_id', 'varchar(36)', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('env', 'varchar(4)', (c) => c.notNull())
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('prefix', 'varchar(12)', (c) => c.notNull())
    .addColumn('key_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('instance_ids', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'varchar(30)')
    .addColumn('revoked_at', 'varchar(30)')
    .addColumn('last_used_at', 'varchar(30)')
    .addColumn('created_at', 'varchar(30)', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('api_keys_org').on('api_keys').column('org_id').execute();
  await db.schema.createIndex('api_keys_revoked').on('api_keys').column('revoked_at').execute();

  await db.schema
    .createTable('engine_auth')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('category', 'varchar(40)', (c) => c.notNull())
    .addColumn('key_id', 'varchar(200)', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'varchar(30)', (c) => c.notNull())
    .addPrimaryKeyConstraint('engine_auth_pk', ['instance_id', 'category', 'key_id'])
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['engine_auth', 'api_keys', 'instances', 'organizations']) {
    await db.schema.dropTable(table).execute();
  }
}
