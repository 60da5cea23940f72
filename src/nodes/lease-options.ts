import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { SessionManager } from '../sessions/manager.ts';
import type { Database } from '../store/schema.ts';
import type { StoreClock } from './store-clock.ts';

/** Default time between lease renewals, ms. */
export const LEASE_HEARTBEAT_MS = 2000;
/** Default lease lifetime without renewal, ms: a dead node's instances move within this plus one heartbeat. */
export const LEASE_TTL_MS = 8000;

/**
 * How long before its leases expire an owner that could not renew them closes every session, ms, for a renewal
 * period of `heartbeatMs`: one heartbeat (a timer that fires late, a clock a little behind the claimer's), plus half
 * of one for the close itself, which ends each socket at once (docs/decisions/0008-leases-and-fencing.md). With the
 * defaults, 3 000 ms: the sessions close 5 s after the last renewal, once two renewals in a row failed.
 */
export function fenceMarginMs(heartbeatMs: number): number {
  return heartbeatMs + heartbeatMs / 2;
}

/** Where a request for an instance runs: here, or on the owner node at `url`. */
export type Route = { local: true } | { local: false; owner: string; url: string };

/** Options of a `LeaseKeeper` (src/nodes/leases.ts). Durations in ms. */
export interface LeaseKeeperOptions {
  db: Kysely<Database>;
  /** This node's id (the registry's). */
  nodeId: string;
  /**
   * The local sessions. `release(id, { fenced: true })` closes a session whose lease is lost or about to expire: its
   * socket ends at once and its pending key and engine-state writes stop (it resolves once the events the socket
   * received are recorded, which can take seconds: the keeper never waits for it in a renewal round). `restore`'s
   * third argument is asked right before the session connects: false connects nothing. `comingBack` says whether a
   * session here that is not connected comes back by itself (else it is stopped until `connect`, and no round
   * connects it); `restoreFailed` is told of each restore that failed and says whether the next round retries it.
   */
  sessions: Pick<SessionManager, 'restore' | 'existing' | 'release' | 'ids' | 'comingBack' | 'restoreFailed'>;
  logger: FastifyBaseLogger;
  /** Renewal and placement period (default {@link LEASE_HEARTBEAT_MS}). */
  heartbeatMs?: number;
  /** Lease lifetime (default {@link LEASE_TTL_MS}); at least three heartbeats. */
  ttlMs?: number;
  /**
   * The clock expiries are written and compared on, epoch ms: the store's, shared by every node
   * (docs/decisions/0008-leases-and-fencing.md, "One clock"). Default: `clock`, synced every round. Tests that
   * drive time by hand pass a fake here (it is never synced).
   */
  now?: () => number;
  /**
   * The store's clock: the node's one {@link StoreClock}, which the services share with the registry, the one-socket
   * locks and the webhook worker (default: one of its own over `db`, for a keeper built alone); ignored when `now`
   * is given.
   */
  clock?: Pick<StoreClock, 'now' | 'sync' | 'synced'>;
}
