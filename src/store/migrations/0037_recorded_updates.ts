import type { Kysely } from 'kysely';

/**
 * `recorded_updates` keeps the platform message id of every edit, deletion for everyone and poll vote an instance
 * recorded (docs/decisions/0024-engines-and-data-flow.md: a message handed over again is recorded once): the platform
 * hands such a message over again as it does any other (an acknowledgement lost with a socket, then the offline
 * redelivery), and the recorder leaves out an update whose id is here (src/events/message-copies.ts). `id` the
 * platform's message id (as `messages.id`), `created_at` epoch ms (docs/decisions/0027-times-as-epoch-ms.md). Primary
 * key (instance_id, id); rows go with their instance (cascade) and are never pruned, as message rows are not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('recorded_updates')
    .addColumn('instance_id', 'varchar(36)', (c) =>
      c.notNull().references('instances.id').onDelete('cascade'),
    )
    .addColumn('id', 'varchar(128)', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('recorded_updates_pkey', ['instance_id', 'id'])
    .execute();
}

/** Drops the table. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('recorded_updates').execute();
}
