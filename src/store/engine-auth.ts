import type { Kysely, Transaction } from 'kysely';
import { SessionReleasedError } from '../domain/errors.ts';
import { extended } from '../domain/objects.ts';
import type { AuthEntry, AuthStateStore } from '../engines/engine.ts';
import type { SecretBox } from '../security/secrets.ts';
import { compiledListStatement, compiledStatement } from './compiled.ts';
import { holdsLease, type LeaseFence } from './leases.ts';
import type { Database } from './schema.ts';
import type { TurnTransactions } from './turn-transactions.ts';

/**
 * The SQL implementation of {@link AuthStateStore} over the `engine_auth` table, values sealed with the
 * {@link SecretBox}.
 */
export class SqlAuthStateStore implements AuthStateStore {
  readonly #db: Kysely<Database>;
  readonly #box: SecretBox;
  readonly #instanceId: string;
  readonly #turn: TurnTransactions | undefined;
  readonly #fence: LeaseFence | undefined;

  /**
   * Keys of instance `instanceId` in `db`. With `turn` (SQLite), a {@link set} runs as one part of the turn's shared
   * transaction (docs/decisions/0051-turn-groups.md) instead of a transaction of its own: the writes a turn's
   * sessions make to their keys commit together with the events recorded in the same turn. With `fence` (several
   * nodes: the lease the session was made under), each {@link set} writes only while the instance's lease still
   * carries its owner and token (docs/decisions/0008-leases-and-fencing.md).
   */
  constructor(
    db: Kysely<Database>,
    box: SecretBox,
    instanceId: string,
    options: { turn?: TurnTransactions | undefined; fence?: LeaseFence | undefined } = {},
  ) {
    this.#db = db;
    this.#box = box;
    this.#instanceId = instanceId;
    this.#turn = options.turn;
    this.#fence = options.fence;
  }

  async get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (ids.length === 0) return out;
    const { rows } = await GET_KEYS.run(
      this.#db,
      { instanceId: this.#instanceId, category },
      ids.map((id) => ({ id })),
    );
    for (const row of rows) out.set(row.key_id, this.#box.open(row.value));
    return out;
  }

  async list(category: string): Promise<Map<string, string>> {
    const rows = await this.#db
      .selectFrom('engine_auth')
      .select(['key_id', 'value'])
      .where('instance_id', '=', this.#instanceId)
      .where('category', '=', category)
      .execute();
    return new Map(rows.map((row) => [row.key_id, this.#box.open(row.value)]));
  }

  /**
   * Writes `entries` in order, all or none (a `null` value removes the key). Values are sealed before the
   * transaction starts, so sealing never holds SQLite's write lock. With a fence, the transaction first reads the
   * instance's lease ({@link holdsLease}, which on PostgreSQL holds a claim of the lease back until this write
   * ends): a session whose lease another node took meanwhile writes nothing, so its key write in flight at the
   * hand-over cannot land after the new owner read or wrote the keys (docs/decisions/0008-leases-and-fencing.md).
   * @throws SessionReleasedError (`not_ready`, 503) when the lease no longer carries the fence's owner and token;
   *   the store's error; with `turn`, only this call's own failure (a shared transaction that failed is run again
   *   one part per transaction).
   */
  async set(entries: readonly AuthEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const writes = this.writer(entries);
    const fence = this.#fence;
    const instanceId = this.#instanceId;
    const write =
      fence === undefined
        ? writes
        : async (trx: Transaction<Database>) => {
            if (!(await holdsLease(trx, instanceId, fence))) throw new SessionReleasedError();
            await writes(trx);
          };
    if (this.#turn === undefined) await this.#db.transaction().execute(write);
    else await this.#turn.run(write, entries.length);
  }

  /**
   * The writes of `entries` (in order; a `null` value removes the key) as a function of a transaction the caller
   * runs, all or none with what else it holds (the recorder's, for a platform change and its events:
   * docs/decisions/0077-state-with-its-events.md). Values are sealed now, before any transaction starts; the
   * function may run more than once (a transaction tried again) and writes the same each time.
   */
  writer(entries: readonly AuthEntry[]): (trx: Transaction<Database>) => Promise<void> {
    const at = Date.now();
    const instanceId = this.#instanceId;
    const sealed = entries.map((entry) => ({
      key: { instanceId, category: entry.category, id: entry.id },
      value: entry.value === null ? null : this.#box.seal(entry.value),
    }));
    return async (trx) => {
      for (const { key, value } of sealed) {
        if (value === null) await DELETE_KEY.run(trx, key);
        else await PUT_KEY.run(trx, extended(key, { value, at }));
      }
    };
  }

  /**
   * Removes every key of the instance. With a fence, only while the lease still carries it, as {@link set}.
   * @throws SessionReleasedError (`not_ready`, 503) when the lease no longer carries the fence's owner and token;
   *   the store's error.
   */
  async clear(): Promise<void> {
    const fence = this.#fence;
    const instanceId = this.#instanceId;
    const remove = (db: Kysely<Database>) =>
      db.deleteFrom('engine_auth').where('instance_id', '=', instanceId).execute();
    if (fence === undefined) {
      await remove(this.#db);
      return;
    }
    await this.#db.transaction().execute(async (trx) => {
      if (!(await holdsLease(trx, instanceId, fence))) throw new SessionReleasedError();
      await remove(trx);
    });
  }
}

/** The sealed values of keys `id` of one category of an instance (compiled per number of keys). */
const GET_KEYS = compiledListStatement<
  { instanceId: string; category: string },
  { id: string },
  { key_id: string; value: string }
>({ id: true }, (db, arg, keys) =>
  db
    .selectFrom('engine_auth')
    .select(['key_id', 'value'])
    .where('instance_id', '=', arg('instanceId'))
    .where('category', '=', arg('category'))
    .where(
      'key_id',
      'in',
      keys.map((key) => key.id),
    ),
);

/** Removes key `id` of a category of an instance (compiled once per store). */
const DELETE_KEY = compiledStatement<{ instanceId: string; category: string; id: string }>((db, arg) =>
  db
    .deleteFrom('engine_auth')
    .where('instance_id', '=', arg('instanceId'))
    .where('category', '=', arg('category'))
    .where('key_id', '=', arg('id')),
);

/** Writes (inserts or replaces) key `id` of a category of an instance, `value` sealed (compiled once per store). */
const PUT_KEY = compiledStatement<{
  instanceId: string;
  category: string;
  id: string;
  value: string;
  at: number;
}>((db, arg) =>
  db
    .insertInto('engine_auth')
    .values({
      instance_id: arg('instanceId'),
      category: arg('category'),
      key_id: arg('id'),
      value: arg('value'),
      updated_at: arg('at'),
    })
    .onConflict((oc) =>
      oc.columns(['instance_id', 'category', 'key_id']).doUpdateSet((eb) => ({
        value: eb.ref('excluded.value'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    ),
);
