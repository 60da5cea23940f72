import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Instance } from '../domain/instance.ts';
import { type ClusterNode, claimLease, dropStaleSocketLock, type Lease } from '../store/leases.ts';
import type { Database } from '../store/schema.ts';
import { leaseValid, loadOf, shareToTake } from './placement.ts';

/** What {@link claimOrphans} works on: this node, the round's clock and lease lifetime (ms), and what it read. */
export interface OrphanClaim {
  db: Kysely<Database>;
  logger: FastifyBaseLogger;
  /** This node's id. */
  nodeId: string;
  /** The round's time on the store's clock, epoch ms. */
  now: number;
  /** Lease lifetime, ms: a lease claimed now expires at `now + ttlMs`. */
  ttlMs: number;
  /** The instances to be connected (`listInstancesToRestore`). */
  wanted: readonly Instance[];
  /** The nodes that can serve. */
  nodes: readonly ClusterNode[];
  /** Every lease, as read this round. */
  leases: readonly Lease[];
  /** The leases this node holds, by instance id: each lease claimed here is added to it. */
  held: Map<string, Lease>;
}

/**
 * Claims for this node its fair share of the orphaned instances (docs/decisions/0008-leases-and-fencing.md): those
 * to be connected without a valid lease (only an expired lease is orphaned: an owner whose heartbeat lapsed may still
 * hold its socket until it fences), as many as `shareToTake` gives this node, least-loaded first. Each claim is
 * conditional on the lease's token; a taker drops the old owner's one-socket lock, whose socket was closed before the
 * lease could expire. Nodes start at a different place of the list (a hash of the node id), so nodes claiming
 * together rarely race for the same rows.
 * @throws the store's error (the leases claimed before it are in `held`).
 */
export async function claimOrphans(claim: OrphanClaim): Promise<void> {
  const { db, logger, nodeId, now, ttlMs, wanted, nodes, leases, held } = claim;
  const byInstance = new Map(leases.map((lease) => [lease.instanceId, lease]));
  // Only an expired lease is orphaned: an owner whose heartbeat lapsed may still hold its socket until it fences.
  const orphans = wanted.filter((instance) => {
    const lease = byInstance.get(instance.id);
    return !lease || !leaseValid(lease, now);
  });
  let take = shareToTake({
    self: nodeId,
    nodes,
    load: loadOf(nodes, leases, now),
    orphans: orphans.length,
  });
  // Start at a different place per node so nodes claiming together rarely race for the same rows.
  const start = orphans.length === 0 ? 0 : hash(nodeId) % orphans.length;
  for (let i = 0; i < orphans.length && take > 0; i++) {
    const instance = orphans[(start + i) % orphans.length];
    if (!instance) continue;
    const lease = await claimLease(db, {
      instanceId: instance.id,
      owner: nodeId,
      previousToken: byInstance.get(instance.id)?.token ?? null,
      previousExpiresAt: byInstance.get(instance.id)?.expiresAt,
      expiresAt: now + ttlMs,
    });
    if (!lease) continue;
    const previous = byInstance.get(instance.id)?.owner;
    if (previous !== undefined && previous !== nodeId) await dropStaleSocketLock(db, instance.id, previous);
    take -= 1;
    held.set(instance.id, lease);
    logger.info({ instanceId: instance.id, token: lease.token }, 'took over an orphaned instance');
  }
}

/** A stable hash of `text` (an unsigned 32-bit integer). */
function hash(text: string): number {
  let value = 0;
  for (const char of text) value = (value * 31 + char.charCodeAt(0)) >>> 0;
  return value;
}
