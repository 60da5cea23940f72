import type { Kysely } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import type { Instance } from '../domain/instance.ts';
import { atTurnEnd } from '../ops/turn-end.ts';
import { listInstances } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';

/** Reads the instances of organization `orgId` in `env`, oldest first (`listInstances` by default). */
export type ReadInstanceList = (orgId: string, env: Environment) => Promise<Instance[]>;

/** The requests of one turn waiting for one list. */
interface Waiting {
  orgId: string;
  env: Environment;
  waiters: { resolve: (list: Instance[]) => void; reject: (error: unknown) => void }[];
}

/**
 * The instance lists requests are resolved among (docs/decisions/0049-turn-batched-reads.md), read for the requests
 * of one turn of the event loop together: the requests that ask for the same organization and environment in a
 * turn share one store read at the turn's end (src/ops/turn-end.ts), which saves Kysely's per-query cost on SQLite
 * and a round trip per request on PostgreSQL (docs/benchmarks.md). Each list is read and answered on its own, so one
 * organization's slow or failed read neither delays nor fails another's. Nothing is cached: every read starts after
 * every request it answers arrived, so a request sees each write that committed before it came (an instance
 * created or deleted by an earlier request, another node or the CLI), exactly as with a read of its own.
 */
export class InstanceLists {
  readonly #read: ReadInstanceList;
  /** Lists asked for in this turn, by `<orgId>/<env>`. */
  #waiting = new Map<string, Waiting>();

  /** Reads from `db`, or with `read` (tests). */
  constructor(db: Kysely<Database>, read?: ReadInstanceList) {
    this.#read = read ?? ((orgId, env) => listInstances(db, orgId, env));
  }

  /**
   * The instances of organization `orgId` in `env`, oldest first, read with the other requests of this turn; each
   * caller gets its own copies of the rows.
   * @throws what the store throws for this list.
   */
  list(orgId: string, env: Environment): Promise<Instance[]> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.size === 0) atTurnEnd(() => this.#dispatch());
      const id = `${orgId}/${env}`;
      let entry = this.#waiting.get(id);
      if (entry === undefined) {
        entry = { orgId, env, waiters: [] };
        this.#waiting.set(id, entry);
      }
      entry.waiters.push({ resolve, reject });
    });
  }

  /** Starts one read per list asked for in the turn; each answers its own requests. */
  #dispatch(): void {
    const lists = [...this.#waiting.values()];
    this.#waiting = new Map();
    for (const { orgId, env, waiters } of lists) {
      this.#read(orgId, env).then(
        (list) => {
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
