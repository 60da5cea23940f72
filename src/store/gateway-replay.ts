import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.ts';
import type { Database } from './schema.ts';

/**
 * Memory of gateway request signatures already used (docs/decisions/0021-gateway-form.md replay protection), shared
 * by every process using the same store (SQL) or Redis.
 */
export interface ReplayMemory {
  /**
   * Records `signature` (lowercase hex) of `instanceId`, remembered until `expiresAtMs` (epoch ms).
   * @returns true the first time, false when it was already recorded and not yet expired (a replay).
   */
  remember(instanceId: string, signature: string, expiresAtMs: number): Promise<boolean>;
}

/** How often expired rows are deleted, at most, per process (milliseconds). */
export const REPLAY_PRUNE_EVERY_MS = 60_000;

/**
 * {@link ReplayMemory} in the `gateway_replay` table (migration 0005): the primary key (instance, signature)
 * makes "first time?" a single atomic insert on SQLite and PostgreSQL alike. Rows whose `expires_at` passed are
 * deleted at most every {@link REPLAY_PRUNE_EVERY_MS} per process.
 */
export class SqlReplayMemory implements ReplayMemory {
  readonly #db: Kysely<Database>;
  readonly #clock: () => number;
  #prunedAt = Number.NEGATIVE_INFINITY;

  constructor(db: Kysely<Database>, clock: () => number) {
    this.#db = db;
    this.#clock = clock;
  }

  async remember(instanceId: string, signature: string, expiresAtMs: number): Promise<boolean> {
    const now = this.#clock();
    if (now - this.#prunedAt >= REPLAY_PRUNE_EVERY_MS) {
      this.#prunedAt = now;
      await this.#db.deleteFrom('gateway_replay').where('expires_at', '<', now).execute();
    }
    const inserted = await this.#db
      .insertInto('gateway_replay')
      .values({ instance_id: instanceId, signature, expires_at: Math.ceil(expiresAtMs) })
      .onConflict((oc) => oc.columns(['instance_id', 'signature']).doNothing())
      .executeTakeFirst();
    // An existing row means the signature was used. (A row past `expires_at` cannot be hit again: its
    // signature carries the same timestamp, which the window check refuses first.)
    return Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0;
  }
}

/**
 * {@link ReplayMemory} in Redis (used when `REDIS_URL` is set, docs/decisions/0019-rate-limits-and-plans.md's shared
 * store): `SET key 1 PX ttl NX` is the atomic claim; Redis expires the key when the signature leaves its window.
 */
export class RedisReplayMemory implements ReplayMemory {
  readonly #redis: Redis;
  readonly #clock: () => number;
  readonly #prefix: string;

  constructor(redis: Redis, clock: () => number, prefix = 'parley:gateway-replay:') {
    this.#redis = redis;
    this.#clock = clock;
    this.#prefix = prefix;
  }

  async remember(instanceId: string, signature: string, expiresAtMs: number): Promise<boolean> {
    const ttlMs = Math.max(1, Math.ceil(expiresAtMs - this.#clock()));
    // Unreachable, a signature cannot be told new: refused as the store's outage is (503 with Retry-After), never
    // taken as new (docs/decisions/0072-redis-outages.md).
    const set = await this.#redis
      .set(`${this.#prefix}${instanceId}:${signature}`, '1', 'PX', ttlMs, 'NX')
      .catch((error: unknown) => {
        throw errors.storeUnavailable(error);
      });
    return set === 'OK';
  }
}
