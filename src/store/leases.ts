import { type Kysely, PostgresAdapter } from 'kysely';
import type { Database } from './schema.ts';

/**
 * Queries of the cluster (docs/decisions/0008-leases-and-fencing.md, migration 0012): instance leases (owner node,
 * fencing token, expiry in epoch ms) and the nodes' internal URLs. Every change of owner is a conditional statement
 * on the previous token (or an insert that does nothing on conflict), so two nodes racing for one instance never both
 * win, on SQLite and PostgreSQL alike.
 */

/** A lease row. `expiresAt` is epoch ms. */
export interface Lease {
  instanceId: string;
  owner: string;
  token: number;
  expiresAt: number;
}

/** A node other nodes can reach: its id, internal base URL and whether it is handing its instances over. */
export interface ClusterNode {
  id: string;
  url: string;
  draining: boolean;
  /** Last heartbeat, epoch ms. */
  heartbeatAt: number;
}

function toLease(row: { instance_id: string; owner: string; token: number; expires_at: number }): Lease {
  return {
    instanceId: row.instance_id,
    owner: row.owner,
    token: Number(row.token),
    expiresAt: Number(row.expires_at),
  };
}

/**
 * The lease a session was made under: its owner node and the fencing token it carried then
 * (docs/decisions/0008-leases-and-fencing.md). A write fenced by it ({@link holdsLease}) lands only while the lease
 * still carries both.
 */
export interface LeaseFence {
  owner: string;
  token: number;
}

/**
 * True when `instanceId`'s lease still names `fence`'s owner and token, read inside the caller's write transaction
 * `trx` (docs/decisions/0008-leases-and-fencing.md: fencing by token). On PostgreSQL the row is read `for share`, so
 * a claim or release of the lease (an update or delete of the row) waits until `trx` ends: a write that found its
 * lease held commits before the lease can change owner, and the new owner, which reads the keys after its claim,
 * reads it. On SQLite the transaction's write lock orders the two the same way. The expiry is not compared: a lease
 * that lapsed but was not taken has no other owner whose writes this one could overwrite.
 * @throws what the driver throws.
 */
export async function holdsLease(
  trx: Kysely<Database>,
  instanceId: string,
  fence: LeaseFence,
): Promise<boolean> {
  const row = await trx
    .selectFrom('instance_leases')
    .select('token')
    .where('instance_id', '=', instanceId)
    .where('owner', '=', fence.owner)
    .where('token', '=', fence.token)
    .$if(trx.getExecutor().adapter instanceof PostgresAdapter, (q) => q.forShare())
    .executeTakeFirst();
  return row !== undefined;
}

/** The lease of `instanceId`, if any row exists (valid or not). */
export async function getLease(db: Kysely<Database>, instanceId: string): Promise<Lease | undefined> {
  const row = await db
    .selectFrom('instance_leases')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  return row ? toLease(row) : undefined;
}

/**
 * Deletes the one-socket lock (`instance_locks`, migration 0004) `owner` left on `instanceId`: called by the node
 * that took the instance's lease from `owner`, which had to close its socket before the lease could be taken
 * (fencing), so the new owner's engine need not wait for the old lock to expire.
 */
export async function dropStaleSocketLock(
  db: Kysely<Database>,
  instanceId: string,
  owner: string,
): Promise<void> {
  await db
    .deleteFrom('instance_locks')
    .where('instance_id', '=', instanceId)
    .where('owner', '=', owner)
    .execute();
}

/** Every lease row. */
export async function listLeases(db: Kysely<Database>): Promise<Lease[]> {
  return (await db.selectFrom('instance_leases').selectAll().execute()).map(toLease);
}

/**
 * Gives `instanceId` to `owner` until `expiresAt` (epoch ms), provided the row still carries `previousToken`
 * (null: no row exists yet) and, when given, the expiry `previousExpiresAt` (epoch ms) the claimer read with it. The
 * token becomes `previousToken + 1` (1 for a new row). Comparing the expiry too makes the claim lose to the owner's
 * renewal of the lease since the claimer read it (docs/decisions/0008-leases-and-fencing.md): a renewal keeps the
 * token, so a claim on the token alone would take a lease its owner had just extended, and both would hold it.
 * @returns the new lease, or undefined when another node changed the row first.
 */
export async function claimLease(
  db: Kysely<Database>,
  input: {
    instanceId: string;
    owner: string;
    previousToken: number | null;
    previousExpiresAt?: number | undefined;
    expiresAt: number;
  },
): Promise<Lease | undefined> {
  const { instanceId, owner, previousToken, previousExpiresAt, expiresAt } = input;
  if (previousToken === null) {
    const inserted = await db
      .insertInto('instance_leases')
      .values({ instance_id: instanceId, owner, token: 1, expires_at: expiresAt })
      .onConflict((oc) => oc.column('instance_id').doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) return undefined;
    return { instanceId, owner, token: 1, expiresAt };
  }
  const updated = await db
    .updateTable('instance_leases')
    .set({ owner, token: previousToken + 1, expires_at: expiresAt })
    .where('instance_id', '=', instanceId)
    .where('token', '=', previousToken)
    .$if(previousExpiresAt !== undefined, (qb) => qb.where('expires_at', '=', previousExpiresAt ?? 0))
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) === 0) return undefined;
  return { instanceId, owner, token: previousToken + 1, expiresAt };
}

/**
 * Pushes the expiry of every lease `owner` holds to `expiresAt` (the owner's heartbeat). With `now` (epoch ms), only
 * the leases still unexpired at `now` are renewed and returned: an expired lease may already have been read as an
 * orphan by another node, whose claim is conditional on the token only, so its owner takes it back by a claim (which
 * increments the token) instead of extending it.
 * @returns the leases `owner` holds after the renewal (with `now`: those it renewed).
 */
export async function renewLeases(
  db: Kysely<Database>,
  owner: string,
  expiresAt: number,
  now?: number,
): Promise<Lease[]> {
  let renew = db.updateTable('instance_leases').set({ expires_at: expiresAt }).where('owner', '=', owner);
  if (now !== undefined) renew = renew.where('expires_at', '>', now);
  await renew.execute();
  let read = db.selectFrom('instance_leases').selectAll().where('owner', '=', owner);
  if (now !== undefined) read = read.where('expires_at', '>', now);
  const rows = await read.execute();
  return rows.map(toLease);
}

/** Deletes `owner`'s lease of `instanceId` if it still carries `token` (a clean release). */
export async function releaseLease(
  db: Kysely<Database>,
  instanceId: string,
  owner: string,
  token: number,
): Promise<void> {
  await db
    .deleteFrom('instance_leases')
    .where('instance_id', '=', instanceId)
    .where('owner', '=', owner)
    .where('token', '=', token)
    .execute();
}

/** Records this node's internal base URL and draining flag in its registry row. */
export async function setNodeEndpoint(
  db: Kysely<Database>,
  id: string,
  endpoint: { url: string; draining: boolean },
): Promise<void> {
  await db
    .updateTable('nodes')
    .set({ url: endpoint.url, draining: endpoint.draining ? 1 : 0 })
    .where('id', '=', id)
    .execute();
}

/** Registered nodes with a URL whose heartbeat is not older than `since` (epoch ms). */
export async function listReachableNodes(db: Kysely<Database>, since: number): Promise<ClusterNode[]> {
  const rows = await db
    .selectFrom('nodes')
    .select(['id', 'url', 'draining', 'heartbeat_at'])
    .where('url', 'is not', null)
    .where('heartbeat_at', '>=', since)
    .execute();
  return rows.map((row) => ({
    id: row.id,
    url: row.url ?? '',
    draining: Number(row.draining) === 1,
    heartbeatAt: Number(row.heartbeat_at),
  }));
}
