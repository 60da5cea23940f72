import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.ts';
import { DomainError } from '../domain/errors.ts';
import { LEASE_HEARTBEAT_MS, LEASE_TTL_MS, LeaseKeeper } from '../nodes/leases.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import type { StoreClock } from '../nodes/store-clock.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';

/** Lease timing of a cluster node, ms: renewal period and lease lifetime (tests shorten them). */
export interface ClusterTiming {
  heartbeatMs?: number;
  ttlMs?: number;
}

/**
 * This process in the node registry (not started: the caller starts it once the webhook worker exists). Its id is
 * `CLUSTER_NODE_ID`, else the webhook worker id a test fixes, else generated. A cluster node's liveness follows its
 * lease timing, so a dead node's webhook claims go with its leases (docs/decisions/0008-leases-and-fencing.md).
 * `onReleased` runs after dead nodes' claims were released; `onDisplaced` once another process took this node's id
 * over ({@link stopServing}). Its heartbeats are on `storeClock`, the node's one store clock
 * (docs/decisions/0008-leases-and-fencing.md, "One clock"), which it reads at every heartbeat.
 */
export function wireNodeRegistry(
  config: Config,
  deps: {
    store: Store;
    storeClock: StoreClock;
    logger: FastifyBaseLogger;
    workerId?: string | undefined;
    cluster?: ClusterTiming | undefined;
    nodeRegistry?: { heartbeatMs?: number; deadAfterMs?: number } | undefined;
    onReleased: () => void;
    onDisplaced: (reason: string) => void;
  },
): NodeRegistry {
  const nodeId = config.cluster?.nodeId ?? deps.workerId;
  return new NodeRegistry({
    db: deps.store.db,
    logger: deps.logger,
    clock: deps.storeClock,
    ...(nodeId === undefined ? {} : { id: nodeId }),
    ...(config.cluster
      ? {
          heartbeatMs: deps.cluster?.heartbeatMs ?? LEASE_HEARTBEAT_MS,
          deadAfterMs: deps.cluster?.ttlMs ?? LEASE_TTL_MS,
        }
      : {}),
    ...deps.nodeRegistry,
    onReleased: deps.onReleased,
    onDisplaced: deps.onDisplaced,
  });
}

/**
 * What a node does once another process took its id over while it ran (the same `NODE_ID` started twice, or a
 * restart that found this process's heartbeat lapsed; docs/decisions/0008-leases-and-fencing.md, "Node identity"):
 * that process renews the same leases and opens the same sessions, so this one closes every session at once and
 * makes none any more (requests that would need one answer 503 `not_ready`, a retry reaching another node through
 * the load balancer, which stops sending here as `/readyz` turns 503), and stops renewing leases. The process keeps
 * running, never exits for it; its webhook worker goes on delivering. Never throws; a failure is logged.
 */
export async function stopServing(deps: {
  sessions: Pick<SessionManager, 'fence'>;
  keeper: Pick<LeaseKeeper, 'stop'> | undefined;
  logger: FastifyBaseLogger;
}): Promise<void> {
  try {
    await deps.sessions.fence(
      new DomainError(
        'not_ready',
        'this node no longer serves instances (another process took its NODE_ID over); retry',
      ),
    );
    await deps.keeper?.stop();
  } catch (error) {
    deps.logger.error({ err: error }, 'stopping to serve failed');
  }
}

/**
 * Several nodes (docs/decisions/0008-leases-and-fencing.md), when `CLUSTER_SECRET` is set: this node's lease keeper
 * (not started: the entry point starts it once listening), its expiries on `storeClock` (the node's one store clock,
 * shared with the registry: "One clock"), the secret of node-to-node calls, and how long a view spanning nodes waits
 * for each node's answer (`askTimeoutMs`, ms); undefined otherwise.
 */
export function wireCluster(
  config: Config,
  deps: {
    store: Store;
    storeClock: StoreClock;
    nodes: NodeRegistry;
    sessions: SessionManager;
    logger: FastifyBaseLogger;
    timing?: ClusterTiming | undefined;
  },
): { keeper: LeaseKeeper; secret: string; askTimeoutMs: number } | undefined {
  if (!config.cluster) return undefined;
  const keeper = new LeaseKeeper({
    db: deps.store.db,
    nodeId: deps.nodes.id,
    sessions: deps.sessions,
    logger: deps.logger,
    clock: deps.storeClock,
    ...deps.timing,
  });
  // Each session's key writes land only while its instance's lease is still this node's (fencing by token).
  deps.sessions.fenceWith(keeper);
  return { secret: config.cluster.secret, keeper, askTimeoutMs: config.cluster.askTimeoutMs };
}
