import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import type { Instance } from '../domain/instance.ts';
import { atTurnEnd } from '../ops/turn-end.ts';
import { listInstances } from '../store/instances.ts';
import type { StoreSignals } from '../store/pg-signals.ts';
import type { Database } from '../store/schema.ts';

/** Reads the instances of organization `orgId` in `env`, oldest first (`listInstances` by default). */
export type ReadInstanceList = (orgId: string, env: Environment) => Promise<Instance[]>;

/** The requests of one turn waiting for one list. */
interface Waiting {
  orgId: string;
  env: Environment;
  waiters: { resolve: (list: Instance[]) => void; reject: (error: unknown) => void }[];
}

/** A list kept between turns, and when it was read (`performance.now()`, ms). */
interface Kept {
  list: Instance[];
  readAt: number;
}

/**
 * Longest a list is kept, ms, however quiet the store's signals are (docs/decisions/0088-kept-instance-lists.md):
 * the bound on how late a change whose signal was lost reaches this process's requests.
 */
export const KEPT_LIST_MAX_AGE_MS = 1_000;

/** The `instances` signal's item for every list (docs/decisions/0088-kept-instance-lists.md). */
const EVERY_LIST = '*';

/** How lists are kept between turns (docs/decisions/0088-kept-instance-lists.md). */
export interface ListKeeping {
  /** The store's signals: an `instances` signal drops its list, a gap every list; kept only while listening. */
  signals: StoreSignals;
  /** Longest a list is kept, ms (default {@link KEPT_LIST_MAX_AGE_MS}). */
  maxAgeMs?: number;
  /** The clock of `maxAgeMs`, ms (default `performance.now`). */
  now?: () => number;
  /**
   * Subscribes a listener to this process's own committed writes of `instances` rows (`onInstancesWritten` of
   * src/store/instance-writes.ts): each drops every kept list at once, so the process's next request sees its own
   * write without waiting for the store's signal.
   */
  ownWrites?: (listener: () => void) => void;
}

/**
 * The instance lists requests are resolved among. The requests that ask for the same organization and environment
 * in a turn of the event loop share one store read at the turn's end (src/ops/turn-end.ts,
 * docs/decisions/0049-turn-batched-reads.md), which saves Kysely's per-query cost on SQLite and a round trip per
 * request on PostgreSQL (docs/benchmarks.md). Each list is read and answered on its own, so one organization's slow
 * or failed read neither delays nor fails another's.
 *
 * With {@link ListKeeping} (a PostgreSQL store's signals, docs/decisions/0088-kept-instance-lists.md) a list read is
 * also kept for the turns after it, until the store signals a change of that list (a trigger on `instances` speaks
 * at every commit that writes one of its rows, whoever writes it), the signals' connection reports a gap, or
 * `maxAgeMs` passes, or this process commits a write of `instances` rows itself (`ownWrites`); while the signals do
 * not listen nothing is kept. A read overtaken by any of these is not kept. A caller that finds no instance in a
 * kept list asks again with `fresh`, so a request is never answered "not found" from a list the store has moved
 * past. Without keeping nothing outlives its turn: every read starts after every request it answers arrived, so a
 * request sees each write that committed before it came.
 */
export class InstanceLists {
  readonly #read: ReadInstanceList;
  readonly #keeping: Required<Omit<ListKeeping, 'ownWrites'>> | undefined;
  /** Lists asked for in this turn, by `<orgId>/<env>`. */
  #waiting = new Map<string, Waiting>();
  /** Lists kept between turns, by `<orgId>/<env>`. */
  readonly #kept = new Map<string, Kept>();
  /** Counts the signals and gaps heard: a read overtaken by one is not kept. */
  #changes = 0;

  /**
   * Reads from `db`, or with `read` (tests); keeps what it read between turns with `keeping`
   * (docs/decisions/0088-kept-instance-lists.md).
   */
  constructor(db: Kysely<Database>, read?: ReadInstanceList, keeping?: ListKeeping) {
    this.#read = read ?? ((orgId, env) => listInstances(db, orgId, env));
    if (keeping !== undefined) {
      this.#keeping = {
        signals: keeping.signals,
        maxAgeMs: keeping.maxAgeMs ?? KEPT_LIST_MAX_AGE_MS,
        now: keeping.now ?? (() => performance.now()),
      };
      keeping.signals.subscribe('instances', (items) => {
        this.#changes += 1;
        // `*`: every list (a `TRUNCATE`, migration 0028).
        if (items.includes(EVERY_LIST)) this.#kept.clear();
        for (const item of items) this.#kept.delete(item);
      });
      keeping.signals.onGap(() => this.#forgetAll());
      keeping.ownWrites?.(() => this.#forgetAll());
    }
  }

  /**
   * The instances of organization `orgId` in `env`, oldest first: a kept list when there is one (unless `fresh`),
   * else read with the other requests of this turn; each caller gets its own copies of the rows.
   * @throws what the store throws for this list.
   */
  list(orgId: string, env: Environment, fresh = false): Promise<Instance[]> {
    const id = `${orgId}/${env}`;
    if (!fresh) {
      const kept = this.#keptList(id);
      if (kept !== undefined) return Promise.resolve(kept.map(copyOf));
    }
    return new Promise((resolve, reject) => {
      if (this.#waiting.size === 0) atTurnEnd(() => this.#dispatch());
      let entry = this.#waiting.get(id);
      if (entry === undefined) {
        entry = { orgId, env, waiters: [] };
        this.#waiting.set(id, entry);
      }
      entry.waiters.push({ resolve, reject });
    });
  }

  /**
   * Copies of the kept list of `orgId` in `env` when one may be used now, else undefined (then {@link list} reads
   * it with the turn's requests).
   */
  kept(orgId: string, env: Environment): Instance[] | undefined {
    return this.#keptList(`${orgId}/${env}`)?.map(copyOf);
  }

  /** Whether lists are kept between turns now (keeping configured and its signals listening). */
  get keeping(): boolean {
    return this.#keeping?.signals.listening === true;
  }

  /** The kept list `id` when it may still be used, else undefined (an expired one is dropped). */
  #keptList(id: string): Instance[] | undefined {
    const keeping = this.#keeping;
    if (keeping === undefined) return undefined;
    if (!keeping.signals.listening) {
      // Changes may go unheard until the connection is back (its gap then drops everything anyway).
      if (this.#kept.size > 0) this.#forgetAll();
      return undefined;
    }
    const kept = this.#kept.get(id);
    if (kept === undefined) return undefined;
    if (keeping.now() - kept.readAt >= keeping.maxAgeMs) {
      this.#kept.delete(id);
      return undefined;
    }
    return kept.list;
  }

  #forgetAll(): void {
    this.#changes += 1;
    this.#kept.clear();
  }

  /** Starts one read per list asked for in the turn; each answers its own requests (and is kept, when it may be). */
  #dispatch(): void {
    const lists = [...this.#waiting.values()];
    this.#waiting = new Map();
    const changes = this.#changes;
    const readAt = this.#keeping?.now();
    for (const { orgId, env, waiters } of lists) {
      this.#read(orgId, env).then(
        (list) => {
          // Kept only when no signal or gap came while it was read (it may have been read before that change).
          if (readAt !== undefined && changes === this.#changes && this.keeping) {
            this.#kept.set(`${orgId}/${env}`, { list, readAt });
          }
          for (const waiter of waiters) waiter.resolve(list.map(copyOf));
        },
        (error: unknown) => {
          for (const waiter of waiters) waiter.reject(error);
        },
      );
    }
  }
}

/** A request's own copy of an instance row (a handler may change what it was given). */
function copyOf(instance: Instance): Instance {
  return { ...instance, ...(instance.subscribe ? { subscribe: [...instance.subscribe] } : {}) };
}
