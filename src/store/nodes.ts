import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';
import { toIso, toMs } from './times.ts';

/**
 * The node registry's rows (migration 0008): one per running parley process, renewed by its heartbeat. See
 * `src/nodes/registry.ts` for how liveness is judged.
 */

/** A registered node. `startedAt` is RFC 3339, `heartbeatAt` epoch ms. */
export interface NodeRecord {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  heartbeatAt: number;
}

/**
 * Registers `node` or renews its heartbeat (an upsert, so a node whose row was removed while it was stalled
 * reappears with its next heartbeat).
 * @throws RangeError when `node.startedAt` is not a time.
 */
export async function upsertNode(db: Kysely<Database>, node: NodeRecord): Promise<void> {
  await db
    .insertInto('nodes')
    .values({
      id: node.id,
      host: node.host,
      pid: node.pid,
      started_at: toMs(node.startedAt),
      heartbeat_at: node.heartbeatAt,
    })
    .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: node.heartbeatAt }))
    .execute();
}

/** Every registered node other than `exceptId`. */
export async function listOtherNodes(db: Kysely<Database>, exceptId: string): Promise<NodeRecord[]> {
  const rows = await db.selectFrom('nodes').selectAll().where('id', '!=', exceptId).execute();
  return rows.map((row) => ({
    id: row.id,
    host: row.host,
    pid: Number(row.pid),
    startedAt: toIso(row.started_at),
    heartbeatAt: Number(row.heartbeat_at),
  }));
}

/**
 * Forgets dead nodes and releases their webhook claims, in one transaction (Graphile Worker's
 * `forceUnlockWorkers`): their pending deliveries lose `locked_by`/`locked_at` and are claimable again at once,
 * in `sequence` order; the attempts they had claimed stay counted (a delivery that keeps killing its worker is
 * bounded by `max_attempts`), and the attempt rows they left open are marked abandoned by the next claim. Rows
 * that are no longer pending are not touched. The instance leases of the nodes in `gone.ids` (a subset of `ids`
 * whose process is known not to exist, so neither does its socket) expire at `gone.at` (epoch ms) when they ran
 * longer, so another node takes them at once; a node found dead by its heartbeat alone keeps its leases until
 * they expire: it may only have lost the store and still hold its sockets until it fences
 * (docs/decisions/0008-leases-and-fencing.md).
 * @returns how many claims were released.
 */
export async function removeDeadNodes(
  db: Kysely<Database>,
  ids: readonly string[],
  gone: { ids: readonly string[]; at: number } = { ids: [], at: 0 },
): Promise<number> {
  if (ids.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    if (gone.ids.length > 0)
      await trx
        .updateTable('instance_leases')
        .set({ expires_at: gone.at })
        .where('owner', 'in', [...gone.ids])
        .where('expires_at', '>', gone.at)
        .execute();
    const released = await trx
      .updateTable('webhook_deliveries')
      .set({ locked_by: null, locked_at: null })
      .where('locked_by', 'in', [...ids])
      // Implies the in-flight index's predicate: the claimed rows are read from it, not every pending row
      // (docs/decisions/0061-claimed-delivery-index.md).
      .where('locked_at', 'is not', null)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    await trx
      .deleteFrom('nodes')
      .where('id', 'in', [...ids])
      .execute();
    return Number(released.numUpdatedRows);
  });
}

/** Removes a node's row (graceful stop, after its claims were finished or released). */
export async function removeNode(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('nodes').where('id', '=', id).execute();
}
