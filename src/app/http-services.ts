import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { Application } from './index.ts';

/**
 * Where the node holding an instance's lease is (docs/decisions/0008-leases-and-fencing.md): served `local`ly, or by
 * node `owner` at base URL `url`.
 */
export type ClusterRoute = { local: true } | { local: false; owner: string; url: string };

/**
 * This node's view of the cluster as the HTTP layer needs it to forward requests (docs/decisions/0008-leases-and-fencing.md);
 * the lease keeper (src/nodes/leases.ts) implements it.
 */
export interface ClusterRouting {
  /** This node's id, sent with every forwarded request. */
  readonly nodeId: string;
  /** Where `instance` is served, taking its lease when no live node holds it. */
  route(instance: Instance): Promise<ClusterRoute>;
  /** Counts a request running on instance `instanceId` until the returned function is called. */
  enter(instanceId: InstanceId): () => void;
  /**
   * Resolves once node `owner` stopped serving instance `instanceId` (its lease expired, or moved while `owner` is no
   * longer live), or once `signal` aborts; never rejects. A request forwarded to `owner` stops waiting for its answer
   * then (src/http/plugins/forward.ts).
   */
  ownerLost(instanceId: InstanceId, owner: string, signal: AbortSignal): Promise<void>;
  /** The instances of `ids` another live node holds, by that node's base URL: the node's id and those instances. */
  remoteOwners(ids: readonly InstanceId[]): Promise<Map<string, RemoteOwner>>;
}

/** A live node holding some instances of a view (`ClusterRouting.remoteOwners`): its id and those instances' ids. */
export interface RemoteOwner {
  owner: string;
  ids: InstanceId[];
}

/**
 * Several nodes (`CLUSTER_SECRET` set): the routing of instance requests, the secret of node-to-node calls, and how
 * long a view spanning nodes (the dashboard's instance list) waits for each other node's answer, ms
 * (`CLUSTER_ASK_TIMEOUT_SECONDS`, docs/decisions/0008-leases-and-fencing.md).
 */
export interface HttpCluster {
  keeper: ClusterRouting;
  secret: string;
  askTimeoutMs: number;
}

/**
 * Everything the HTTP layer (src/http) is given, and all it may use (docs/architecture.md): the application services
 * plus the few process-wide things a plugin needs. The store, engines, sessions, send queue and webhook worker stay
 * behind `app`. The `Services` of src/services.ts is one.
 */
export interface HttpServices {
  /** The application services, one per family (src/app). */
  app: Application;
  logger: FastifyBaseLogger;
  clock: Clock;
  /** The settings HTTP reads: public base URL, ffmpeg path, the group invite link base. */
  config: Pick<Config, 'publicUrl' | 'ffmpegPath' | 'inviteBaseUrl'>;
  /** Prometheus metrics: the request counters HTTP writes, the registry `/metrics` serves. */
  metrics: Metrics;
  /** The outbound guard media sends fetch their URLs through (docs/decisions/0020-security-promises.md). */
  guard: OutboundGuard;
  /** Set with several nodes. */
  cluster: HttpCluster | undefined;
}
