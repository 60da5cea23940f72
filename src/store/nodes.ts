import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';
import { toIso, toMs } from './times.ts';

/**
 * The node registry's rows (migration 0008): one per running parley process, renewed by its heartbeat. See
 * `src/nodes/registry.ts` for how liveness is judged, and docs/decisions/0008-leases-and-fencing.md ("Node
 * identity") for which process a row belongs to (migration 0032).
 */

/** A registered node. `startedAt` is RFC 3339, `heartbeatAt` epoch ms. */
export interface NodeRecord {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  heartbeatAt: number;
  /**
   * The process-id space `pid` belongs to (boot id and PID namespace); null or absent when unknown, as on the rows
   * of a version before migration 0032: such a node is judged by its heartbeat alone.
   */
  processSpace?: string | null;
  /** Random per start of the node's registry: which process holds the row; null or absent when unknown. */
  incarnation?: string | null;
}

type NodeRow = Awaited<ReturnType<typeof readNode>>;

function readNode(db: Kysely<Database>, id: string) {
  return db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
}

function toRecord(row: NonNullable<NodeRow>): NodeRecord {
  return {
    id: row.id,
    host: row.host,
    pid: Number(row.pid),
    startedAt: toIso(row.started_at),
    heartbeatAt: Number(row.heartbeat_at),
    processSpace: row.process_space,
    incarnation: row.incarnation,
  };
}

function rowOf(node: NodeRecord) {
  return {
    id: node.id,
    host: node.host,
    pid: node.pid,
    started_at: toMs(node.startedAt),
    heartbeat_at: node.heartbeatAt,
    process_space: node.processSpace ?? null,
    incarnation: node.incarnation ?? null,
  };
}

/**
 * Registers `node` or renews its heartbeat (an upsert, so a node whose row was removed while it was stalled
 * reappears with its next heartbeat). Whichever process holds the row, only its heartbeat changes: the registry
 * itself registers with {@link registerNode} and renews with {@link beatNode}, which tell processes apart.
 * @throws RangeError when `node.startedAt` is not a time.
 */
export async function upsertNode(db: Kysely<Database>, node: NodeRecord): Promise<void> {
  await db
    .insertInto('nodes')
    .values(rowOf(node))
    .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: node.heartbeatAt }))
    .execute();
}

/**
 * Inserts `node`'s row unless a row with its id exists (left as it is).
 * @returns whether the row was inserted.
 * @throws RangeError when `node.startedAt` is not a time.
 */
export async function registerNode(db: Kysely<Database>, node: NodeRecord): Promise<boolean> {
  const result = await db
    .insertInto('nodes')
    .values(rowOf(node))
    .onConflict((oc) => oc.column('id').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/** The row of node `id`, or undefined when there is none. */
export async function getNode(db: Kysely<Database>, id: string): Promise<NodeRecord | undefined> {
  const row = await readNode(db, id);
  return row === undefined ? undefined : toRecord(row);
}

/**
 * Renews the heartbeat (`at`, epoch ms) of node `id` while its row still belongs to process `incarnation`.
 * @returns false when there is no such row: it was removed (a sweep found the node dead while it stalled), or
 *   another process holds the id now.
 */
export async function beatNode(
  db: Kysely<Database>,
  id: string,
  incarnation: string,
  at: number,
): Promise<boolean> {
  const result = await db
    .updateTable('nodes')
    .set({ heartbeat_at: at })
    .where('id', '=', id)
    .where('incarnation', '=', incarnation)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Gives the row of `node.id`, left by a process found dead (`previous`, as read), to `node`'s process, and releases
 * what the dead one held under that id, in one transaction, as {@link removeDeadNodes} does for a dead node
 * (docs/decisions/0008-leases-and-fencing.md, "Node identity"): its pending webhook claims are claimable again at
 * once, its instance leases expire at `at` (epoch ms) when they ran longer, so the instances are claimed again
 * under new fencing tokens (a write of the old process, if it only stalled, is refused by its old token), and the
 * row's URL and draining flag are cleared until `node` publishes its own. Conditional on the row being still as
 * read (same incarnation and heartbeat): two processes taking the id over at once cannot both succeed.
 * @returns how many claims were released, or undefined when the row changed since it was read (nothing done).
 * @throws RangeError when `node.startedAt` is not a time.
 */
export async function takeOverNode(
  db: Kysely<Database>,
  node: NodeRecord,
  previous: NodeRecord,
  at: number,
): Promise<number | undefined> {
  const row = rowOf(node);
  return db.transaction().execute(async (trx) => {
    const taken = await trx
      .updateTable('nodes')
      .set({
        host: row.host,
        pid: row.pid,
        started_at: row.started_at,
        heartbeat_at: row.heartbeat_at,
        process_space: row.process_space,
        incarnation: row.incarnation,
        url: null,
        draining: 0,
      })
      .where('id', '=', node.id)
      .where('heartbeat_at', '=', previous.heartbeatAt)
      .where((eb) =>
        previous.incarnation == null
          ? eb('incarnation', 'is', null)
          : eb('incarnation', '=', previous.incarnation),
      )
      .executeTakeFirst();
    if (Number(taken.numUpdatedRows) === 0) return undefined;
    await expireLeases(trx, [node.id], at);
    return releaseClaims(trx, [node.id]);
  });
}

/** Every registered node other than `exceptId`. */
export async function listOtherNodes(db: Kysely<Database>, exceptId: string): Promise<NodeRecord[]> {
  const rows = await db.selectFrom('nodes').selectAll().where('id', '!=', exceptId).execute();
  return rows.map(toRecord);
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
    if (gone.ids.length > 0) await expireLeases(trx, gone.ids, gone.at);
    const released = await releaseClaims(trx, ids);
    await trx
      .deleteFrom('nodes')
      .where('id', 'in', [...ids])
      .execute();
    return released;
  });
}

/** Expires at `at` (epoch ms) the instance leases of `owners` that ran longer. */
async function expireLeases(
  trx: Transaction<Database>,
  owners: readonly string[],
  at: number,
): Promise<void> {
  await trx
    .updateTable('instance_leases')
    .set({ expires_at: at })
    .where('owner', 'in', [...owners])
    .where('expires_at', '>', at)
    .execute();
}

/** Makes the pending webhook deliveries claimed by `owners` claimable again. @returns how many. */
async function releaseClaims(trx: Transaction<Database>, owners: readonly string[]): Promise<number> {
  const released = await trx
    .updateTable('webhook_deliveries')
    .set({ locked_by: null, locked_at: null })
    .where('locked_by', 'in', [...owners])
    // Implies the in-flight index's predicate: the claimed rows are read from it, not every pending row
    // (docs/decisions/0061-claimed-delivery-index.md).
    .where('locked_at', 'is not', null)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(released.numUpdatedRows);
}

/**
 * Removes a node's row (graceful stop, after its claims were finished or released): with `incarnation`, only while
 * the row still belongs to that process (a process whose id another took over leaves the other's row).
 */
export async function removeNode(db: Kysely<Database>, id: string, incarnation?: string): Promise<void> {
  await db
    .deleteFrom('nodes')
    .where('id', '=', id)
    .$if(incarnation !== undefined, (qb) => qb.where('incarnation', '=', incarnation ?? ''))
    .execute();
}
