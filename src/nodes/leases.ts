import { setTimeout as delay } from 'node:timers/promises';
import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { listInstancesToRestore } from '../store/instances.ts';
import {
  type ClusterNode,
  claimLease,
  dropStaleSocketLock,
  getLease,
  type Lease,
  type LeaseFence,
  listLeases,
  listReachableNodes,
  releaseLease,
  renewLeases,
  setNodeEndpoint,
} from '../store/leases.ts';
import { FenceTimer } from './lease-fence.ts';
import { LEASE_HEARTBEAT_MS, LEASE_TTL_MS, type LeaseKeeperOptions, type Route } from './lease-options.ts';
import { LeasedSessions } from './leased-sessions.ts';
import { LocalRequests } from './local-requests.ts';
import { claimOrphans } from './orphans.ts';
import { leaseValid, leastLoaded, loadOf } from './placement.ts';
import { StoreClock } from './store-clock.ts';

export type { LeaseKeeperOptions, Route } from './lease-options.ts';
export { LEASE_HEARTBEAT_MS, LEASE_TTL_MS } from './lease-options.ts';

/**
 * The leases of one node (docs/decisions/0008-leases-and-fencing.md). Each instance that has a session anywhere has a
 * row in `instance_leases` naming its owner node, a fencing token and an expiry:
 * - every heartbeat the owner pushes the expiry of all its leases forward and closes any local session whose lease it
 *   no longer holds; when renewals keep failing it closes every session `fenceMarginMs` (a heartbeat and a half) BEFORE
 *   its leases expire, by a timer set at each renewal (src/nodes/lease-fence.ts), so no other node can open a socket
 *   while this one still has one (fencing by time). The closes run apart from the rounds: a close waiting for its
 *   session's received events to be recorded holds no renewal. No session is restored here, and no lease claimed for
 *   this node, while that timer is not armed (it fired, or no renewal succeeded yet): nothing would close it;
 * - a lease changes owner only by a statement conditional on its token (see `src/store/leases.ts`), once it has
 *   expired (an owner whose process is gone has its leases expired by the registry); an owner that merely looks
 *   dead (its registry heartbeat lapsed) keeps its lease until it expires. The taker then drops the old owner's
 *   one-socket lock (`instance_locks`), whose socket was closed before the lease could expire;
 * - orphaned instances (to be connected, without a valid lease) are claimed by the nodes below their fair share
 *   (least-loaded first); new instances go to the least-loaded node when first addressed. Running sessions are
 *   never moved to rebalance: a joining node fills up with new and orphaned instances only;
 * - `drain` (SIGTERM) hands every lease to the least-loaded other node after the local session is closed and the
 *   requests running on it have finished.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #heartbeatMs: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  /** Reads the store's clock (a no-op when the options' `now` drives time). */
  readonly #sync: () => Promise<void>;
  /** Whether the clock read the store's at least once. */
  readonly #synced: () => boolean;
  readonly #held = new Map<string, Lease>();
  readonly #moving = new Map<string, Promise<void>>();
  /** The requests running here per instance: a hand-over waits for them ({@link enter}, {@link drain}). */
  readonly #requests = new LocalRequests();
  /**
   * The local sessions of the leased instances: their restores, and the closes of those whose lease moved or lapsed,
   * which run apart from the rounds (src/nodes/leased-sessions.ts).
   */
  readonly #local: LeasedSessions;
  #url = '';
  #draining = false;
  #timer: NodeJS.Timeout | undefined;
  /**
   * Closes every local session a margin before the leases of the last renewal expire (re-armed at each renewal);
   * started between `start` and `stop` (src/nodes/lease-fence.ts).
   */
  readonly #fence: FenceTimer;
  #ticking: Promise<void> | undefined;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#heartbeatMs = options.heartbeatMs ?? LEASE_HEARTBEAT_MS;
    this.#ttlMs = Math.max(options.ttlMs ?? LEASE_TTL_MS, 3 * this.#heartbeatMs);
    if (options.now === undefined) {
      const clock = options.clock ?? new StoreClock({ db: options.db, logger: options.logger });
      this.#now = () => clock.now();
      this.#sync = () => clock.sync();
      this.#synced = () => clock.synced;
    } else {
      this.#now = options.now;
      this.#sync = async () => undefined;
      this.#synced = () => true;
    }
    this.#fence = new FenceTimer({
      ttlMs: this.#ttlMs,
      heartbeatMs: this.#heartbeatMs,
      now: () => this.#now(),
      onFire: () => this.#fenceFired(),
    });
    this.#local = new LeasedSessions({
      sessions: options.sessions,
      logger: options.logger,
      armed: () => this.#fence.armed(),
    });
  }

  /** This node's id. */
  get nodeId(): string {
    return this.#options.nodeId;
  }

  /** True once `drain` started: the node hands its instances over and reports itself not ready. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Ids of the instances whose lease this node holds (as of its last renewal). */
  held(): string[] {
    return [...this.#held.keys()];
  }

  /**
   * This node's lease of `instanceId` as a fence (owner and token) for the writes of a session made now
   * (`SessionManager.fenceWith`, src/store/engine-auth.ts); undefined when this node holds none.
   */
  fenceOf(instanceId: string): LeaseFence | undefined {
    const lease = this.#held.get(instanceId);
    return lease === undefined ? undefined : { owner: lease.owner, token: lease.token };
  }

  /**
   * Publishes this node's base URL, renews, claims its share of orphaned instances and restores them, then does
   * so every heartbeat.
   * @throws the store's error when the first round fails.
   */
  async start(url: string): Promise<void> {
    this.#url = url;
    this.#fence.start();
    try {
      await this.tick();
    } catch (error) {
      this.#fence.halt();
      this.#fence.cancel(false);
      throw error;
    }
    this.#timer = setInterval(() => {
      this.#ticking ??= this.tick()
        .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'lease renewal failed'))
        .finally(() => {
          this.#ticking = undefined;
        });
    }, this.#heartbeatMs);
    this.#timer.unref();
  }

  /**
   * One round: endpoint, renewal, fencing of lost instances, placement of orphans, restores. The close of a session
   * whose lease this node no longer holds is started, not awaited (a live session's close lasts until the events
   * its socket received are recorded): the next round, and its renewal, never wait for it.
   * @throws the store's error.
   */
  async tick(): Promise<void> {
    const { db, nodeId, sessions, logger } = this.#options;
    await setNodeEndpoint(db, nodeId, { url: this.#url, draining: this.#draining });
    // Read after the endpoint's write, which a restarting store can hold for seconds: an older `now` could renew a
    // lease that expired meanwhile. The store's clock, read again each round: never this node's wall clock, which
    // can step (docs/decisions/0008-leases-and-fencing.md, "One clock").
    await this.#sync();
    const now = this.#now();
    const mine = await renewLeases(db, nodeId, now + this.#ttlMs, now);
    // Leases written now expire at `now` plus ttl: the fencing timer fires a margin before.
    this.#fence.arm(now);
    this.#held.clear();
    for (const lease of mine) this.#held.set(lease.instanceId, lease);
    for (const id of sessions.ids()) {
      if (this.#held.has(id) || this.#moving.has(id) || this.#local.closing(id) !== undefined) continue;
      // Placed here by a request since the renewal read the rows: keep it.
      const lease = await getLease(db, id);
      if (lease?.owner === nodeId && lease.expiresAt > now) {
        this.#held.set(id, lease);
        continue;
      }
      logger.warn({ instanceId: id }, 'closing a session whose lease another node holds');
      void this.#local.release(id);
    }
    if (this.#draining) return;
    const wanted = await listInstancesToRestore(db);
    const nodes = await this.#nodes(now);
    const leases = await listLeases(db);
    await claimOrphans({
      db,
      logger,
      nodeId,
      now,
      ttlMs: this.#ttlMs,
      wanted,
      nodes,
      leases,
      held: this.#held,
    });
    for (const instance of wanted) {
      if (this.#held.has(instance.id)) void this.ensureRestored(instance);
    }
  }

  /**
   * Where a request for `instance` runs. A valid lease decides; without one the instance is placed on the
   * least-loaded node first (a new instance, or one whose owner died). On this node, a session the instance should
   * have is restored from stored credentials before the request runs, and a request arriving while the instance is
   * being handed over waits for the hand-over and then goes to the new owner. A valid lease whose owner is not
   * reachable (its heartbeat lapsed) is waited out, looked at again every heartbeat, until its owner is back or it
   * expires: its owner may still hold the socket (docs/decisions/0008-leases-and-fencing.md). An instance whose
   * lease this node holds, or would claim for itself, is served here only while this node's fencing timer is armed
   * (`FenceTimer.armed`).
   * @throws DomainError not_ready (503) `the node holding this instance does not answer; retry` when such a lease is
   *   still valid after its lifetime and a heartbeat (its owner renews it without showing in the registry);
   *   not_ready (503) `this node could not renew its leases in time; retry` when the instance would be served here
   *   while this node's fencing timer is not armed (renewals failed until it fired).
   */
  async route(instance: Instance): Promise<Route> {
    const { db, nodeId } = this.#options;
    /** Heartbeats a valid lease whose owner is not reachable is waited out: its lifetime and one more. */
    let waitsLeft = Math.ceil(this.#ttlMs / this.#heartbeatMs) + 1;
    if (!this.#synced()) await this.#sync();
    for (let round = 0; round < 5; round++) {
      const moving = this.#moving.get(instance.id);
      if (moving) await moving;
      const now = this.#now();
      const nodes = await this.#nodes(now);
      const lease = await getLease(db, instance.id);
      if (lease && leaseValid(lease, now)) {
        if (lease.owner === nodeId) {
          if (this.#moving.has(instance.id)) continue;
          // The lease looks valid for a moment still, but the fence fired: a session restored now would outlive it.
          if (!this.#fence.armed()) throw unrenewed();
          this.#held.set(instance.id, lease);
          await this.ensureRestored(instance);
          // A hand-over that started while the session was being restored closes it before this request would
          // count as running here (`enter`): wait for the hand-over and route again.
          if (this.#moving.has(instance.id)) continue;
          if (!this.#fence.armed()) throw unrenewed();
          return { local: true };
        }
        const owner = nodes.find((node) => node.id === lease.owner);
        if (owner) return { local: false, owner: owner.id, url: owner.url };
        // Its owner may be back at its next heartbeat, or its lease expire: looked at again each heartbeat, the
        // wait not counted as a round. A lease still renewed by an owner that never shows up is not served here.
        if (waitsLeft === 0)
          throw new DomainError('not_ready', 'the node holding this instance does not answer; retry');
        waitsLeft -= 1;
        await delay(Math.max(1, Math.min(lease.expiresAt - now, this.#heartbeatMs)));
        round -= 1;
        continue;
      }
      const target = leastLoaded(nodes, loadOf(nodes, await listLeases(db), now));
      if (!target) break;
      if (target.id === nodeId && !this.#fence.armed()) throw unrenewed();
      const claimed = await claimLease(db, {
        instanceId: instance.id,
        owner: target.id,
        previousToken: lease?.token ?? null,
        previousExpiresAt: lease?.expiresAt,
        expiresAt: now + this.#ttlMs,
      });
      if (claimed && lease && lease.owner !== target.id)
        await dropStaleSocketLock(db, instance.id, lease.owner);
      // This node's own lease lapsed and came back with a new token: a session still here was made under the old
      // one, so its key writes would be refused (src/store/engine-auth.ts); it is closed and made again under the new.
      if (claimed?.owner === nodeId && lease !== undefined && this.#options.sessions.existing(instance.id))
        await this.#local.release(instance.id);
    }
    // No serving node is known (this node not yet registered, or alone and draining): serve here.
    return { local: true };
  }

  /**
   * Resolves once node `owner` stopped serving `instanceId`, for a request forwarded to it that still waits for its
   * answer (src/http/plugins/forward.ts, docs/decisions/0008-leases-and-fencing.md): its lease of the instance expired
   * (it stopped renewing it: dead, stopped or cut off from the store; its fencing timer closed its session), or the
   * instance is leased to another node while `owner` is no longer live (its registry heartbeat lapsed). A lease
   * handed over by a draining owner that still runs is not a loss: that owner answers the request. Looked at every
   * heartbeat on the store's clock; a read the store fails is tried again at the next. Resolves too once `signal`
   * aborts (the answer came). Never rejects.
   */
  async ownerLost(instanceId: string, owner: string, signal: AbortSignal): Promise<void> {
    const { db } = this.#options;
    while (!signal.aborted) {
      await delay(this.#heartbeatMs, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) return;
      try {
        const lease = await getLease(db, instanceId);
        const now = this.#now();
        if (lease === undefined || !leaseValid(lease, now)) return;
        if (lease.owner !== owner && !(await this.#nodes(now)).some((node) => node.id === owner)) return;
      } catch {
        // The store did not answer: looked at again at the next heartbeat.
      }
    }
  }

  /**
   * Which other live nodes hold a valid lease of some of `ids`, as node base URL → the node's id and those instance
   * ids. Places nothing: an instance without a valid lease, or held here, is not listed. For a view spanning
   * instances on several nodes (the dashboard's instance list asks each owner for the status of its own).
   */
  async remoteOwners(ids: readonly string[]): Promise<Map<string, { owner: string; ids: string[] }>> {
    const { db, nodeId } = this.#options;
    if (!this.#synced()) await this.#sync();
    const now = this.#now();
    const nodes = await this.#nodes(now);
    const wanted = new Set(ids);
    const byUrl = new Map<string, { owner: string; ids: string[] }>();
    for (const lease of await listLeases(db)) {
      if (!wanted.has(lease.instanceId) || lease.owner === nodeId || !leaseValid(lease, now)) continue;
      const owner = nodes.find((node) => node.id === lease.owner);
      if (!owner) continue;
      const listed = byUrl.get(owner.url);
      if (listed === undefined) byUrl.set(owner.url, { owner: owner.id, ids: [lease.instanceId] });
      else listed.ids.push(lease.instanceId);
    }
    return byUrl;
  }

  /**
   * Restores `instance`'s session here when it should be connected and is not (stored credentials, no QR), unless
   * the platform stopped it or this node's fencing timer is not armed, after any close of its session still running
   * here (`LeasedSessions.ensureRestored`, src/nodes/leased-sessions.ts). Never rejects: a failure is logged.
   */
  ensureRestored(instance: Instance): Promise<void> {
    return this.#local.ensureRestored(instance);
  }

  /** Counts a request running locally on `instanceId`; call the returned function when it has answered. */
  enter(instanceId: string): () => void {
    return this.#requests.enter(instanceId);
  }

  /**
   * Hands every lease of this node over (SIGTERM, docs/decisions/0008-leases-and-fencing.md): marks the node draining
   * (no new instances), then per instance waits for its local requests (at most `waitMs`), closes the session and
   * gives the lease to the least-loaded other node, which restores the session on its first request or heartbeat.
   * Alone, the leases are simply released.
   */
  async drain(waitMs = 5000): Promise<void> {
    const { db, nodeId, sessions, logger } = this.#options;
    this.#draining = true;
    await setNodeEndpoint(db, nodeId, { url: this.#url, draining: true }).catch(() => undefined);
    const leases = await renewLeases(db, nodeId, this.#now() + this.#ttlMs);
    await Promise.all(
      leases.map(async (lease) => {
        let done: () => void = () => undefined;
        this.#moving.set(
          lease.instanceId,
          new Promise<void>((resolve) => {
            done = resolve;
          }),
        );
        try {
          await this.#requests.idle(lease.instanceId, waitMs);
          // A close the rounds started (the lease moved, or the fence fired) ends before the lease is handed on.
          await this.#local.closing(lease.instanceId);
          await sessions.release(lease.instanceId);
          const now = this.#now();
          const nodes = (await this.#nodes(now)).filter((node) => node.id !== nodeId);
          const target = leastLoaded(nodes, loadOf(nodes, await listLeases(db), now));
          if (target) {
            await claimLease(db, {
              instanceId: lease.instanceId,
              owner: target.id,
              // The token alone: this node's own renewals go on while it waits for the session to idle.
              previousToken: lease.token,
              expiresAt: now + this.#ttlMs,
            });
          } else {
            await releaseLease(db, lease.instanceId, nodeId, lease.token);
          }
          this.#held.delete(lease.instanceId);
          logger.info({ instanceId: lease.instanceId, to: target?.id ?? null }, 'handed an instance over');
        } catch (error) {
          logger.warn({ err: error, instanceId: lease.instanceId }, 'handing an instance over failed');
        } finally {
          this.#moving.delete(lease.instanceId);
          done();
        }
      }),
    );
  }

  /**
   * Stops renewing and fencing. The leases left expire by themselves (after `drain`, none are left). The closes of
   * sessions the rounds started are not awaited here: a close waits for its events to be recorded, which a shutdown
   * bounds only once the session manager closes (`SessionManager.closeAll`, which waits for them).
   */
  async stop(): Promise<void> {
    this.#fence.halt();
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
    this.#fence.cancel(true);
  }

  /**
   * Closes every local session at once (fenced: no quiescing): the leases could not be renewed in time. Until a
   * renewal arms the timer again, nothing is restored here (`FenceTimer.armed`). Called when the fencing timer fires.
   */
  #fenceFired(): void {
    const { logger, sessions } = this.#options;
    this.#held.clear();
    const ids = sessions.ids();
    if (ids.length === 0) return;
    logger.error({ instances: ids.length }, 'leases could not be renewed in time; closing every session');
    for (const id of ids) void this.#local.release(id);
  }

  /** Nodes that can serve: registered, reachable, heartbeat within the lease lifetime (this node always). */
  async #nodes(now: number): Promise<ClusterNode[]> {
    const nodes = await listReachableNodes(this.#options.db, now - this.#ttlMs);
    if (!nodes.some((node) => node.id === this.#options.nodeId) && this.#url !== '') {
      nodes.push({ id: this.#options.nodeId, url: this.#url, draining: this.#draining, heartbeatAt: now });
    }
    return nodes;
  }
}

/** The refusal of a request this node would serve while its fencing timer is not armed. */
function unrenewed(): DomainError {
  return new DomainError('not_ready', 'this node could not renew its leases in time; retry');
}
