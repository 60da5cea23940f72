import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { LockAttempt, SessionLock, SessionLockHooks, SessionLocks } from '../engines/engine.ts';
import type { Database } from '../store/schema.ts';

/** How long a lock of {@link InstanceLock} lives unless renewed, ms (default). */
export const LOCK_TTL_MS = 30_000;
/** How often the holder renews its lock, ms (a third of {@link LOCK_TTL_MS}). */
export const LOCK_HEARTBEAT_MS = 10_000;

/** Options of {@link InstanceLock}. */
export interface InstanceLockOptions {
  db: Kysely<Database>;
  instanceId: string;
  /** This process's identity (the engine's `processId`). */
  owner: string;
  /**
   * The clock expiries are written and judged on, epoch ms: the store's, shared by every node (the node's
   * `StoreClock`, docs/decisions/0008-leases-and-fencing.md, "One clock"), so a node whose wall clock runs ahead
   * takes no live lock and one whose clock runs behind writes no expiry already past for the others.
   */
  clock: Clock;
  /** Lifetime of a lock without renewal, ms (default {@link LOCK_TTL_MS}). */
  ttlMs?: number;
  /** Renewal period, ms (default {@link LOCK_HEARTBEAT_MS}); must be well under `ttlMs`. */
  heartbeatMs?: number;
  /** Called once when the lock is lost (taken over, or not renewed before it expired). */
  onLost: (reason: string) => void;
  /** Called when a renewal fails with a store error (the lock is kept until it would expire). */
  onRenewError?: (error: unknown) => void;
}

/**
 * The one-socket lock of an instance (docs/decisions/0025-live-engine.md): a row in `instance_locks` (migration 0004)
 * that a process holds while it has a socket open on the instance's credentials. Acquire takes a free row, an expired
 * row, or its own row (a conditional UPDATE, then INSERT … ON conflict DO NOTHING — race-free on SQLite and
 * PostgreSQL with the same Kysely code); the holder renews `expires_at` every `heartbeatMs`; release deletes the row.
 * The row's times are epoch ms (docs/decisions/0027-times-as-epoch-ms.md) on the store's clock (`clock`); the
 * `expiresAt` of a refusal is RFC 3339.
 */
export class InstanceLock implements SessionLock {
  readonly #options: InstanceLockOptions;
  readonly #ttlMs: number;
  readonly #heartbeatMs: number;
  #timer: NodeJS.Timeout | undefined;
  #held = false;

  constructor(options: InstanceLockOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? LOCK_TTL_MS;
    this.#heartbeatMs = options.heartbeatMs ?? LOCK_HEARTBEAT_MS;
  }

  /** True while this process holds the lock (as far as it knows). */
  get held(): boolean {
    return this.#held;
  }

  /**
   * Takes the lock and starts the heartbeat. Idempotent while held.
   * @returns `{ acquired: false, holder, expiresAt }` when another process holds a live lock.
   * @throws the store's error when the store cannot be reached.
   */
  async acquire(): Promise<LockAttempt> {
    const { db, instanceId, owner, clock } = this.#options;
    for (let round = 0; round < 2; round++) {
      const now = Math.trunc(clock());
      const expires = now + this.#ttlMs;
      const updated = await db
        .updateTable('instance_locks')
        .set({ owner, acquired_at: now, expires_at: expires })
        .where('instance_id', '=', instanceId)
        .where((eb) => eb.or([eb('owner', '=', owner), eb('expires_at', '<', now)]))
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) > 0) return this.#took();
      const inserted = await db
        .insertInto('instance_locks')
        .values({ instance_id: instanceId, owner, acquired_at: now, expires_at: expires })
        .onConflict((oc) => oc.column('instance_id').doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0) return this.#took();
      const row = await db
        .selectFrom('instance_locks')
        .select(['owner', 'expires_at'])
        .where('instance_id', '=', instanceId)
        .executeTakeFirst();
      if (row) return { acquired: false, holder: row.owner, expiresAt: iso(row.expires_at) };
      // the holder released between our statements: try once more
    }
    const row = await db
      .selectFrom('instance_locks')
      .select(['owner', 'expires_at'])
      .where('instance_id', '=', instanceId)
      .executeTakeFirst();
    return { acquired: false, holder: row?.owner ?? 'unknown', expiresAt: iso(row?.expires_at ?? clock()) };
  }

  /**
   * Extends the lock by `ttlMs` (the heartbeat calls this). Calls `onLost` and returns false when another process
   * took the row. A store error is reported through `onRenewError` and keeps the lock (returns true): the store
   * being unreachable does not mean another process holds the instance.
   */
  async renew(): Promise<boolean> {
    if (!this.#held) return false;
    const { db, instanceId, owner, clock } = this.#options;
    const now = clock();
    try {
      const updated = await db
        .updateTable('instance_locks')
        .set({ expires_at: Math.trunc(now) + this.#ttlMs })
        .where('instance_id', '=', instanceId)
        .where('owner', '=', owner)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) > 0) {
        return true;
      }
      this.#lose('another parley process took over this instance');
      return false;
    } catch (error) {
      // A store outage is not a takeover (docs/decisions/0011-store-faults.md): the socket stays open and the
      // heartbeat goes on; the first renewal that reaches the store again finds the row still ours, or taken by
      // another process (then the lock is lost above). Several nodes are fenced by their leases instead.
      this.#report(error);
      return true;
    }
  }

  /** Stops the heartbeat and deletes the row if this process still holds it. Never throws. */
  async release(): Promise<void> {
    this.#stopHeartbeat();
    if (!this.#held) return;
    this.#held = false;
    const { db, instanceId, owner } = this.#options;
    try {
      await db
        .deleteFrom('instance_locks')
        .where('instance_id', '=', instanceId)
        .where('owner', '=', owner)
        .execute();
    } catch (error) {
      this.#report(error);
    }
  }

  /** Stops the heartbeat without touching the row (shutdown of a process that lost its store). */
  stop(): void {
    this.#stopHeartbeat();
    this.#held = false;
  }

  #took(): LockAttempt {
    this.#held = true;
    if (!this.#timer) {
      this.#timer = setInterval(() => {
        this.renew().catch((error: unknown) => this.#report(error));
      }, this.#heartbeatMs);
      this.#timer.unref();
    }
    return { acquired: true };
  }

  #lose(reason: string): void {
    if (!this.#held) return;
    this.#held = false;
    this.#stopHeartbeat();
    this.#options.onLost(reason);
  }

  /** Hands a store error to `onRenewError`; a throwing callback must not become an unhandled rejection. */
  #report(error: unknown): void {
    try {
      this.#options.onRenewError?.(error);
    } catch {
      // nothing left to tell: the callback is the logger
    }
  }

  #stopHeartbeat(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/** A stored time (epoch ms; PostgreSQL's `bigint` arrives as a number) as RFC 3339. */
function iso(ms: number): string {
  return new Date(Number(ms)).toISOString();
}

/** Options of {@link SqlSessionLocks}: the store, this process's identity, its clock and the lock timing (ms). */
export interface SqlSessionLocksOptions {
  db: Kysely<Database>;
  /** This process's identity in the lock table, unique per process (the node id). */
  owner: string;
  /**
   * The store's clock, epoch ms, every lock's expiry is written and judged on: the services pass the node's
   * `StoreClock` (docs/decisions/0008-leases-and-fencing.md, "One clock"). Default: each session's clock
   * (`SessionLockHooks.clock`), for an engine built alone in a test.
   */
  clock?: Clock;
  /** Lifetime of a lock without renewal, ms (default {@link LOCK_TTL_MS}). */
  ttlMs?: number;
  /** Renewal period, ms (default {@link LOCK_HEARTBEAT_MS}). */
  heartbeatMs?: number;
}

/**
 * The {@link SessionLocks} port over the `instance_locks` table: one {@link InstanceLock} per instance, on the store's
 * clock when given ({@link SqlSessionLocksOptions.clock}).
 */
export class SqlSessionLocks implements SessionLocks {
  readonly #options: SqlSessionLocksOptions;

  constructor(options: SqlSessionLocksOptions) {
    this.#options = options;
  }

  forInstance(instanceId: string, hooks: SessionLockHooks): InstanceLock {
    const { db, owner, clock, ttlMs, heartbeatMs } = this.#options;
    return new InstanceLock({
      db,
      instanceId,
      owner,
      clock: clock ?? hooks.clock,
      onLost: hooks.onLost,
      ...(hooks.onRenewError ? { onRenewError: hooks.onRenewError } : {}),
      ...(ttlMs === undefined ? {} : { ttlMs }),
      ...(heartbeatMs === undefined ? {} : { heartbeatMs }),
    });
  }
}
