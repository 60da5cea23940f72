import type { Kysely } from 'kysely';

/**
 * Several nodes (docs/decisions/0008-leases-and-fencing.md): one lease per instance naming the node that holds its
 * engine session, with a fencing token incremented on every change of owner and an expiry (epoch ms) the owner's
 * heartbeat pushes forward. The node registry gains each node's internal base URL (where other nodes forward
 * requests) and a draining flag (a node handing its instances over before it exits receives no new ones).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('instance_leases')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.primaryKey().references('instances.id').onDelete('cascade'),
    )
    .addColumn('owner', 'varchar(100)', (c) => c.notNull())
    .addColumn('token', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('instance_leases_owner').on('instance_leases').column('owner').execute();
  await db.schema.alterTable('nodes').addColumn('url', 'varchar(500)').execute();
  await db.schema
    .alterTable('nodes')
    .addColumn('draining', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

/** Undoes {@link up} (a rollback through the migrator; the service only migrates up). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('nodes').dropColumn('draining').execute();
  await db.schema.alterTable('nodes').dropColumn('url').execute();
  await db.schema.dropIndex('instance_leases_owner').execute();
  await db.schema.dropTable('instance_leases').execute();
}
