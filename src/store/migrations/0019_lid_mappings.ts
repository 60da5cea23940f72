import type { Kysely } from 'kysely';

/**
 * LID mappings (docs/decisions/0038-lid-mappings.md): `lid_mappings` keeps every phone↔LID pair an instance's
 * platform told it, one row per LID: `lid` and `phone` are digits only (`<lid>@lid` and `<phone>@s.whatsapp.net`
 * without their domains), `updated_at` epoch ms (docs/decisions/0027-times-as-epoch-ms.md) of the last time the pair
 * was seen. Primary key (instance_id, lid); `lid_mappings_phone` on (instance_id, phone) answers the reverse lookup.
 * Rows go with their instance (cascade).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('lid_mappings')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('lid', 'varchar(32)', (c) => c.notNull())
    .addColumn('phone', 'varchar(32)', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('lid_mappings_pkey', ['instance_id', 'lid'])
    .execute();
  await db.schema
    .createIndex('lid_mappings_phone')
    .on('lid_mappings')
    .columns(['instance_id', 'phone'])
    .execute();
}

/** Drops the table (and its index). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('lid_mappings').execute();
}
