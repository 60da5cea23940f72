import type { Kysely } from 'kysely';

/**
 * Business labels (docs/decisions/0045-business-labels.md): what parley has seen of an instance's labels and of the
 * labels of its chats, from the platform's app state sync and from its own changes.
 * - `labels`: one row per label, primary key (instance_id, label_id); `label_id` the platform's id (digits),
 *   `name`, `color` (0 to 19), `predefined_id` (the platform's predefined label number, or null), `updated_at`
 *   epoch ms (docs/decisions/0027-times-as-epoch-ms.md) of the last change seen. A deleted label loses its row.
 * - `chat_labels`: one row per labelled chat and label, primary key (instance_id, chat, label_id), `updated_at`
 *   epoch ms. No foreign key to `labels`: the platform may name a label in a chat before parley sees the label.
 * Rows go with their instance (cascade).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('labels')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('label_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('color', 'integer', (c) => c.notNull())
    .addColumn('predefined_id', 'varchar(32)')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('labels_pkey', ['instance_id', 'label_id'])
    .execute();
  await db.schema
    .createTable('chat_labels')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('chat', 'varchar(160)', (c) => c.notNull())
    .addColumn('label_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('chat_labels_pkey', ['instance_id', 'chat', 'label_id'])
    .execute();
  await db.schema
    .createIndex('chat_labels_label')
    .on('chat_labels')
    .columns(['instance_id', 'label_id'])
    .execute();
}

/** Drops both tables (and the index). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('chat_labels').execute();
  await db.schema.dropTable('labels').execute();
}
