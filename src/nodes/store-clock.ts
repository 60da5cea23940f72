import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Database } from '../store/schema.ts';

/**
 * How far this node's wall clock may differ from the store's before {@link StoreClock} logs an error, ms: the
 * default lease lifetime (docs/decisions/0008-leases-and-fencing.md, "One clock").
 */
export const CLOCK_SKEW_ERROR_MS = 8000;

/**
 * Most a sync's new reading may fall behind what {@link StoreClock.now} already answered, ms, and still be held back:
 * a reading a little behind (half a round trip's error either way, the monotonic clock's drift since the last sync)
 * would otherwise move the estimate back by that much, and times taken on either side of the sync (two webhook
 * deliveries' due times, one send after another) would read in the wrong order. Further behind, the store's clock
 * itself was set back, and the estimate follows it at once (docs/decisions/0008-leases-and-fencing.md, "One clock").
 */
export const HELD_BACK_MAX_MS = 1000;

/** Options of a {@link StoreClock}. Times in epoch ms, durations in ms. */
export interface StoreClockOptions {
  db: Kysely<Database>;
  logger: FastifyBaseLogger;
  /**
   * Reads the store's clock, epoch ms (default: `clock_timestamp()` on PostgreSQL; this process's wall clock on
   * SQLite, whose store is this process). Tests pass a fake.
   */
  read?: () => Promise<number>;
  /** This node's wall clock, epoch ms, compared with the store's only to log a skew (default Date.now). */
  wall?: () => number;
  /** A monotonic clock, ms from an arbitrary origin (default performance.now); never steps with the wall clock. */
  monotonic?: () => number;
  /** A wall clock further than this from the store's is logged as an error (default {@link CLOCK_SKEW_ERROR_MS}). */
  skewErrorMs?: number;
}

/** The store's clock on PostgreSQL, epoch ms: `clock_timestamp()`, the time the statement reads it. */
async function readPostgresClock(db: Kysely<Database>): Promise<number> {
  const result = await sql<{
    ms: string | number;
  }>`select extract(epoch from clock_timestamp()) * 1000 as ms`.execute(db);
  const ms = Number(result.rows[0]?.ms);
  if (!Number.isFinite(ms)) throw new Error('the store did not answer its time');
  return ms;
}

/**
 * The one clock every node of a cluster judges lease expiries and node heartbeats on: the store's
 * (docs/decisions/0008-leases-and-fencing.md, "One clock"). Each node's wall clock can step (an NTP step, a VM
 * resumed, a bad clock at boot): judged on it, a node stepped forward by more than a lease lifetime read every other
 * node as dead and every lease as expired, and took them while their owners still held them; one stepped back wrote
 * expiries already past for its peers.
 *
 * {@link sync} reads the store's clock (one round trip) and keeps it with the monotonic time of the middle of that
 * round trip; {@link now} is that reading plus the monotonic time elapsed since, so a step of this node's wall clock
 * changes nothing. Its error is half a round trip plus the drift of the monotonic clock since the last sync, which the
 * lease keeper and the registry make every round. A wall clock that differs from the store's by more than
 * `skewErrorMs` is logged as an error (once, and again once it came back within it and left again): nothing is
 * decided on it, but the node's other times (logs, webhook timestamps) are wrong.
 */
export class StoreClock {
  readonly #read: () => Promise<number>;
  readonly #wall: () => number;
  readonly #monotonic: () => number;
  readonly #skewErrorMs: number;
  readonly #logger: FastifyBaseLogger;
  /** The store's time at the last sync, epoch ms (undefined before the first). */
  #storeAt: number | undefined;
  /** The monotonic time of that reading. */
  #monotonicAt = 0;
  #skewLogged = false;
  /** The last time {@link now} answered, epoch ms (a reading a little behind it is held back to it). */
  #answered = Number.NEGATIVE_INFINITY;
  /** The read in flight, which a concurrent {@link sync} joins. */
  #syncing: Promise<void> | undefined;

  constructor(options: StoreClockOptions) {
    const { db } = options;
    this.#read =
      options.read ??
      (db.getExecutor().adapter instanceof PostgresAdapter
        ? () => readPostgresClock(db)
        : async () => Date.now());
    this.#wall = options.wall ?? Date.now;
    this.#monotonic = options.monotonic ?? (() => performance.now());
    this.#skewErrorMs = options.skewErrorMs ?? CLOCK_SKEW_ERROR_MS;
    this.#logger = options.logger;
  }

  /**
   * Reads the store's clock and keeps it (see {@link StoreClock}); logs an error when this node's wall clock is
   * further than `skewErrorMs` from it. A call while a read is in flight joins that read: the users of one node's
   * clock (the registry, the lease keeper) never read the store twice at once.
   * @throws the store's error (the estimate of the last sync is kept).
   */
  sync(): Promise<void> {
    if (this.#syncing === undefined) {
      this.#syncing = this.#readStore().finally(() => {
        this.#syncing = undefined;
      });
    }
    return this.#syncing;
  }

  async #readStore(): Promise<void> {
    const before = this.#monotonic();
    const store = await this.#read();
    const after = this.#monotonic();
    const at = before + (after - before) / 2;
    this.#storeAt = store;
    this.#monotonicAt = at;
    const skew = this.#wall() - (store + (after - at));
    if (Math.abs(skew) > this.#skewErrorMs) {
      if (!this.#skewLogged)
        this.#logger.error(
          { skewMs: Math.round(skew) },
          "this node's wall clock differs from the store's by more than a lease lifetime: leases and node " +
            "heartbeats are judged on the store's clock, but fix this node's time (NTP)",
        );
      this.#skewLogged = true;
    } else {
      this.#skewLogged = false;
    }
  }

  /** Whether {@link sync} succeeded at least once. */
  get synced(): boolean {
    return this.#storeAt !== undefined;
  }

  /**
   * The store's clock now, whole epoch ms, as this node estimates it: the last reading plus the monotonic time
   * elapsed since, never less than an earlier answer unless the estimate fell more than {@link HELD_BACK_MAX_MS}
   * behind it (a sync's reading a little behind the estimate before it holds the answers at that earlier one until
   * the new estimate passes it). Before the first {@link sync}, this node's wall clock.
   */
  now(): number {
    if (this.#storeAt === undefined) return this.#wall();
    const estimate = Math.floor(this.#storeAt + (this.#monotonic() - this.#monotonicAt));
    if (estimate < this.#answered && this.#answered - estimate <= HELD_BACK_MAX_MS) return this.#answered;
    this.#answered = estimate;
    return estimate;
  }
}
