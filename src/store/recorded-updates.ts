import type { Insertable, Kysely } from 'kysely';
import { type RowSetWrites, rowSetInsert } from './row-sets.ts';
import type { Database, RecordedUpdatesTable } from './schema.ts';

/**
 * The platform message ids of the edits, deletions and poll votes an instance recorded, the ids of the group
 * changes it recorded from platform notifications (`<notification id>/<index>`) and the steps of the calls it
 * reported (`call/<call id>/offer`, `call/<call id>/end`) (`recorded_updates`, migration 0037): what tells an update the platform handed over again from a new one (src/events/message-copies.ts,
 * docs/decisions/0024-engines-and-data-flow.md). Rows are never pruned, as message rows are not, so the answer holds
 * however old the first copy is.
 */

/**
 * Which of `ids` are recorded updates of instance `instanceId` (one statement, by the table's primary key); empty
 * without a statement when `ids` is.
 * @throws the store's error.
 */
export async function recordedUpdateIds(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('recorded_updates')
    .select('id')
    .where('instance_id', '=', instanceId)
    .where('id', 'in', [...ids])
    .execute();
  return new Set(rows.map((row) => row.id));
}

/**
 * The insert of update ids `ids` of instance `instanceId` recorded at `at` (epoch ms), not run (for the recorder's
 * write group, src/store/write-groups.ts); an id already stored is left as it is.
 */
export function recordUpdateIdsWrites(
  instanceId: string,
  ids: readonly string[],
  at: number,
): RowSetWrites<Insertable<RecordedUpdatesTable>> {
  return {
    statement: INSERT_RECORDED_UPDATES,
    rows: ids.map((id) => ({ instance_id: instanceId, id, created_at: at })),
  };
}

/** Update id rows, an id already stored left as it is (src/store/row-sets.ts). */
const INSERT_RECORDED_UPDATES = rowSetInsert<'recorded_updates', Insertable<RecordedUpdatesTable>>(
  'recorded_updates',
  {
    fields: { instance_id: true, id: true, created_at: true },
    conflict: (oc) => oc.columns(['instance_id', 'id']).doNothing(),
  },
);
