import type { ClusterNode, Lease } from '../store/leases.ts';

/**
 * Placement of instances on nodes (docs/decisions/0008-leases-and-fencing.md: new and orphaned instances spread
 * evenly across live nodes). Pure functions over the lease table and the reachable nodes, so every node reaches the
 * same answer from the same rows.
 */

/**
 * Whether `lease` still binds its instance at `now` (epoch ms): until it expires, whatever the registry says of its
 * owner (docs/decisions/0008-leases-and-fencing.md). An owner that lost the store stops heartbeating while its lease
 * still runs and its socket is open: it closes the socket only a margin before the expiry (fencing by time), so a
 * lease taken because its owner looked dead could open a second socket. An owner known to be gone (its process no
 * longer exists) has its leases expired by the registry (`removeDeadNodes`, src/store/nodes.ts).
 */
export function leaseValid(lease: Lease, now: number): boolean {
  return lease.expiresAt > now;
}

/** How many valid leases each of `nodes` holds at `now` (epoch ms); leases of other owners are not counted. */
export function loadOf(
  nodes: readonly ClusterNode[],
  leases: readonly Lease[],
  now: number,
): Map<string, number> {
  const load = new Map(nodes.map((node) => [node.id, 0]));
  for (const lease of leases) {
    if (!leaseValid(lease, now) || !load.has(lease.owner)) continue;
    load.set(lease.owner, (load.get(lease.owner) ?? 0) + 1);
  }
  return load;
}

/**
 * The node a new or orphaned instance goes to: the least-loaded node that is not draining (ties broken by id, so
 * concurrent deciders agree); undefined when no such node exists.
 */
export function leastLoaded(
  nodes: readonly ClusterNode[],
  load: ReadonlyMap<string, number>,
): ClusterNode | undefined {
  let best: ClusterNode | undefined;
  for (const node of nodes) {
    if (node.draining) continue;
    if (
      !best ||
      (load.get(node.id) ?? 0) < (load.get(best.id) ?? 0) ||
      ((load.get(node.id) ?? 0) === (load.get(best.id) ?? 0) && node.id < best.id)
    )
      best = node;
  }
  return best;
}

/**
 * How many more instances node `self` should take this round: its fair share of all placed-or-waiting instances
 * (`ceil(total / serving nodes)`) minus what it holds, never below zero. Sessions already running elsewhere are not
 * moved (a node joining takes only new and orphaned instances: no session is dropped to rebalance).
 */
export function shareToTake(input: {
  self: string;
  nodes: readonly ClusterNode[];
  load: ReadonlyMap<string, number>;
  orphans: number;
}): number {
  const serving = input.nodes.filter((node) => !node.draining);
  if (!serving.some((node) => node.id === input.self)) return 0;
  let placed = 0;
  for (const node of serving) placed += input.load.get(node.id) ?? 0;
  const share = Math.ceil((placed + input.orphans) / serving.length);
  return Math.max(0, share - (input.load.get(input.self) ?? 0));
}
