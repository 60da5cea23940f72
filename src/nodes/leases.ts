import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { SessionManager } from '../sessions/manager.ts';
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
import type { Database } from '../store/schema.ts';
import { leaseValid, leastLoaded, loadOf, shareToTake } from './placement.ts';
import { StoreClock } from './store-clock.ts';

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

/** Options of a {@link LeaseKeeper}. Durations in ms. */
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

/**
 * The leases of one node (docs/decisions/0008-leases-and-fencing.md). Each instance that has a session anywhere has a
 * row in `instance_leases` naming its owner node, a fencing token and an expiry:
 * - every heartbeat the owner pushes the expiry of all its leases forward and closes any local session whose
 *   lease it no longer holds; when renewals keep failing it closes every session {@link fenceMarginMs} (a heartbeat
 *   and a half) BEFORE its leases expire, by a timer set at each renewal, so no other node can open a socket while
 *   this one still has one (fencing by time). The closes run apart from the rounds: a close waiting for its
 *   session's received events to be recorded holds no renewal. No session is restored here, and no lease claimed
 *   for this node, while that timer is not armed (it fired, or no renewal succeeded yet): nothing would close it;
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
  readonly #restoring = new Map<string, Promise<void>>();
  readonly #moving = new Map<string, Promise<void>>();
  readonly #inflight = new Map<string, number>();
  readonly #idle = new Map<string, () => void>();
  /**
   * Closes of sessions whose lease moved or lapsed, by instance id ({@link #release}): they run apart from the
   * rounds, and a restore of the instance here waits for its close to end.
   */
  readonly #releasing = new Map<string, Promise<void>>();
  #url = '';
  #draining = false;
  #timer: NodeJS.Timeout | undefined;
  /** Closes every local session a margin before the leases of the last renewal expire (re-armed at each renewal). */
  #fenceTimer: NodeJS.Timeout | undefined;
  /** True between `start` and `stop`: renewals arm the fencing timer. */
  #started = false;
  #ticking: Promise<void> | undefined;
  /** Epoch ms of the last successful renewal; leases written then expire at this plus ttl. */
  #renewedAt = 0;
  /** Epoch ms at which the fencing timer set at the last renewal fires (see {@link #fenceArmed}). */
  #fenceAt = 0;

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
    this.#started = true;
    try {
      await this.tick();
    } catch (error) {
      this.#started = false;
      clearTimeout(this.#fenceTimer);
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
    this.#renewedAt = now;
    this.#armFence();
    this.#held.clear();
    for (const lease of mine) this.#held.set(lease.instanceId, lease);
    for (const id of sessions.ids()) {
      if (this.#held.has(id) || this.#moving.has(id) || this.#releasing.has(id)) continue;
      // Placed here by a request since the renewal read the rows: keep it.
      const lease = await getLease(db, id);
      if (lease?.owner === nodeId && lease.expiresAt > now) {
        this.#held.set(id, lease);
        continue;
      }
      logger.warn({ instanceId: id }, 'closing a session whose lease another node holds');
      void this.#release(id);
    }
    if (this.#draining) return;
    const wanted = await listInstancesToRestore(db);
    const nodes = await this.#nodes(now);
    const leases = await listLeases(db);
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
        expiresAt: now + this.#ttlMs,
      });
      if (!lease) continue;
      const previous = byInstance.get(instance.id)?.owner;
      if (previous !== undefined && previous !== nodeId) await dropStaleSocketLock(db, instance.id, previous);
      take -= 1;
      this.#held.set(instance.id, lease);
      logger.info({ instanceId: instance.id, token: lease.token }, 'took over an orphaned instance');
    }
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
   * ({@link #fenceArmed}).
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
          if (!this.#fenceArmed()) throw unrenewed();
          this.#held.set(instance.id, lease);
          await this.ensureRestored(instance);
          // A hand-over that started while the session was being restored closes it before this request would
          // count as running here (`enter`): wait for the hand-over and route again.
          if (this.#moving.has(instance.id)) continue;
          if (!this.#fenceArmed()) throw unrenewed();
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
      if (target.id === nodeId && !this.#fenceArmed()) throw unrenewed();
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
        await this.#release(instance.id);
    }
    // No serving node is known (this node not yet registered, or alone and draining): serve here.
    return { local: true };
  }

  /**
   * Which other live nodes hold a valid lease of some of `ids`, as node base URL → those instance ids. Places
   * nothing: an instance without a valid lease, or held here, is not listed. For a view spanning instances on
   * several nodes (the dashboard's instance list asks each owner for the status of its own).
   */
  async remoteOwners(ids: readonly string[]): Promise<Map<string, string[]>> {
    const { db, nodeId } = this.#options;
    if (!this.#synced()) await this.#sync();
    const now = this.#now();
    const nodes = await this.#nodes(now);
    const wanted = new Set(ids);
    const byUrl = new Map<string, string[]>();
    for (const lease of await listLeases(db)) {
      if (!wanted.has(lease.instanceId) || lease.owner === nodeId || !leaseValid(lease, now)) continue;
      const owner = nodes.find((node) => node.id === lease.owner);
      if (!owner) continue;
      byUrl.set(owner.url, [...(byUrl.get(owner.url) ?? []), lease.instanceId]);
    }
    return byUrl;
  }

  /**
   * Restores `instance`'s session here when it should be connected and is not (stored credentials, no QR). A
   * session already here that is not connected is asked to connect again while it comes back by itself
   * (`SessionManager.comingBack`: a no-op while its own connection attempt or reconnect runs; its restore failed
   * and is retried here, every round, unless the platform refused it); one the platform stopped (replaced, refused)
   * stays down until `connect`, as on one node (docs/decisions/0016-session-lifecycle.md), and answers `409`. Only
   * a session made here is logged as restored, once. `instance` may be stale: the session
   * manager connects only if the store still wants the instance connected when its turn comes
   * ({@link SessionManager.restore}), so a disconnect that lands meanwhile is not undone. Nothing is restored while
   * this node's fencing timer is not armed ({@link #fenceArmed}: asked again right before the session connects), and
   * a restore of an instance whose released session is still closing here starts once that close ended. Never
   * rejects: a failure is logged.
   */
  ensureRestored(instance: Instance): Promise<void> {
    const { sessions } = this.#options;
    if (instance.desiredState !== 'connected' || instance.jid === null) return Promise.resolve();
    const releasing = this.#releasing.get(instance.id);
    const existing = releasing === undefined ? sessions.existing(instance.id) : undefined;
    if (existing !== undefined && (existing.state().connected || !sessions.comingBack(instance.id)))
      return Promise.resolve();
    if (!this.#fenceArmed()) return Promise.resolve();
    const running = this.#restoring.get(instance.id);
    if (running) return running;
    const restore = (
      releasing === undefined ? this.#restore(instance) : releasing.then(() => this.#restore(instance))
    ).finally(() => this.#restoring.delete(instance.id));
    this.#restoring.set(instance.id, restore);
    return restore;
  }

  /** {@link ensureRestored}'s restore, once no close of the instance's session runs here. Never rejects. */
  async #restore(instance: Instance): Promise<void> {
    const { sessions, logger } = this.#options;
    const existing = sessions.existing(instance.id);
    if (existing?.state().connected || !this.#fenceArmed()) return;
    try {
      const restored = await sessions.restore(instance.id, undefined, () => this.#fenceArmed());
      if (restored && existing === undefined)
        logger.info({ instanceId: instance.id }, 'session restored on this node');
    } catch (error) {
      // Retried at the next round unless the platform refused it: meanwhile the instance answers 503 with
      // Retry-After, as on one node while a restore's retry is pending; refused, it stays stopped (409) until
      // `connect`.
      const retry = sessions.restoreFailed(instance.id, error);
      logger.warn(
        { err: error, instanceId: instance.id, retry },
        retry
          ? 'restoring a session failed; retried at the next round'
          : 'restoring a session failed: refused by the platform, not retried',
      );
    }
  }

  /** Counts a request running locally on `instanceId`; call the returned function when it has answered. */
  enter(instanceId: string): () => void {
    this.#inflight.set(instanceId, (this.#inflight.get(instanceId) ?? 0) + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const count = (this.#inflight.get(instanceId) ?? 1) - 1;
      if (count > 0) {
        this.#inflight.set(instanceId, count);
        return;
      }
      this.#inflight.delete(instanceId);
      this.#idle.get(instanceId)?.();
    };
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
          await this.#idleOf(lease.instanceId, waitMs);
          // A close the rounds started (the lease moved, or the fence fired) ends before the lease is handed on.
          await this.#releasing.get(lease.instanceId);
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
    this.#started = false;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
    clearTimeout(this.#fenceTimer);
    this.#fenceTimer = undefined;
  }

  /**
   * Sets the fencing timer for the leases of the last renewal, which expire at `#renewedAt + ttl`: it fires
   * {@link fenceMarginMs} before, unless a later renewal sets it again. Read at a timer rather than at the next
   * heartbeat, which runs up to a heartbeat late (the renewal's clock is read after its first statement).
   */
  #armFence(): void {
    if (!this.#started) return;
    clearTimeout(this.#fenceTimer);
    const at = this.#renewedAt + this.#ttlMs - fenceMarginMs(this.#heartbeatMs);
    this.#fenceAt = at;
    this.#fenceTimer = setTimeout(() => this.#fence(), Math.max(0, at - this.#now()));
    this.#fenceTimer.unref();
  }

  /**
   * True when a session opened here now would be closed in time if no renewal succeeded from now on: the fencing
   * timer of the last renewal is set and not yet due. Always true for a keeper not started (`tick` run by hand
   * fences nothing by time).
   */
  #fenceArmed(): boolean {
    if (!this.#started) return true;
    return this.#fenceTimer !== undefined && this.#now() < this.#fenceAt;
  }

  /**
   * Closes every local session at once (fenced: no quiescing): the leases could not be renewed in time. Until a
   * renewal arms the timer again, nothing is restored here ({@link #fenceArmed}).
   */
  #fence(): void {
    const { logger, sessions } = this.#options;
    this.#fenceTimer = undefined;
    this.#held.clear();
    const ids = sessions.ids();
    if (ids.length === 0) return;
    logger.error({ instances: ids.length }, 'leases could not be renewed in time; closing every session');
    for (const id of ids) void this.#release(id);
  }

  /**
   * Starts the fenced close of the session of `instanceId` (`sessions.release`) unless one runs already, and keeps
   * it in {@link #releasing} until it ended (docs/decisions/0008-leases-and-fencing.md). Never rejects.
   */
  #release(instanceId: string): Promise<void> {
    const running = this.#releasing.get(instanceId);
    if (running) return running;
    const closing = this.#options.sessions
      .release(instanceId, { fenced: true })
      .catch((error: unknown) =>
        this.#options.logger.warn({ err: error, instanceId }, 'closing a session failed'),
      )
      .finally(() => {
        if (this.#releasing.get(instanceId) === closing) this.#releasing.delete(instanceId);
      });
    this.#releasing.set(instanceId, closing);
    return closing;
  }

  #idleOf(instanceId: string, waitMs: number): Promise<void> {
    if (!this.#inflight.has(instanceId)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(finish, waitMs);
      function finish() {
        clearTimeout(timer);
        resolve();
      }
      this.#idle.set(instanceId, () => {
        this.#idle.delete(instanceId);
        finish();
      });
    });
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

function hash(text: string): number {
  let value = 0;
  for (const char of text) value = (value * 31 + char.charCodeAt(0)) >>> 0;
  return value;
}
