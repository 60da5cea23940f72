import DataLoader from 'dataloader';
import type { Kysely } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import type { Instance } from '../domain/instance.ts';
import { atTurnEnd } from '../ops/turn-end.ts';
import { listInstances } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';

/** An organization's instances in one environment: what a request is resolved among. */
interface ListKey {
  orgId: string;
  env: Environment;
}

/**
 * The instance lists requests are resolved among (docs/decisions/0002-instance-resolution.md), read for the requests
 * of one turn of the event loop together: the requests that ask in the same turn share one store read per
 * organization and environment (DataLoader, batches dispatched at the turn's end: src/ops/turn-end.ts), which on PostgreSQL saves a
 * round trip per request under load (docs/benchmarks.md). Nothing is cached: every read starts after every request
 * it answers arrived, so a request sees each write that committed before it came (an instance created or deleted by
 * an earlier request, another node or the CLI), exactly as with a read of its own.
 */
export class InstanceLists {
  readonly #loader: DataLoader<ListKey, Instance[], string>;

  constructor(db: Kysely<Database>) {
    this.#loader = new DataLoader<ListKey, Instance[], string>(
      async (keys) => {
        // Without a cache DataLoader passes duplicate keys: one read per distinct list.
        const reads = new Map<string, Promise<Instance[]>>();
        return Promise.all(
          keys.map((key) => {
            const id = `${key.orgId}/${key.env}`;
            let read = reads.get(id);
            if (read === undefined) {
              read = listInstances(db, key.orgId, key.env);
              reads.set(id, read);
            }
            // Each request gets its own objects: a handler may change the instance it was given.
            return read.then((list) => list.map((instance) => ({ ...instance })));
          }),
        );
      },
      { cache: false, batchScheduleFn: (dispatch) => atTurnEnd(dispatch) },
    );
  }

  /**
   * The instances of organization `orgId` in `env`, oldest first (`listInstances`), read in this turn's batch.
   * @throws what the store throws (every request of the batch that asked for the same list gets the error).
   */
  list(orgId: string, env: Environment): Promise<Instance[]> {
    return this.#loader.load({ orgId, env });
  }
}
