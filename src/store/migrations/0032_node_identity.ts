import type { Kysely } from 'kysely';

/**
 * Two columns of `nodes` (both nullable: rows of an older version read null) that tell one process from another
 * (docs/decisions/0008-leases-and-fencing.md, "Node identity"):
 * - `process_space` (varchar 200): the process-id space the node runs in, its kernel's boot id and its PID
 *   namespace (`<boot id>/pid:[<inode>]`); two nodes see each other's processes only when it is equal. Null where
 *   it cannot be read: such a node is judged by its heartbeat alone.
 * - `incarnation` (varchar 36): a random UUID per start of the registry: the row's process, so a node finds its id
 *   taken over by another process (the same `NODE_ID` started twice) and a restart finds its predecessor's row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('nodes').addColumn('process_space', 'varchar(200)').execute();
  await db.schema.alterTable('nodes').addColumn('incarnation', 'varchar(36)').execute();
}

/** Drops the columns. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('nodes').dropColumn('incarnation').execute();
  await db.schema.alterTable('nodes').dropColumn('process_space').execute();
}
