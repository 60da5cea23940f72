import type { Kysely, Transaction } from 'kysely';
import { TurnGroup } from '../ops/turn-group.ts';
import { isStoreUnavailableError } from './faults.ts';
import type { Database } from './schema.ts';

/**
 * Most weight one shared transaction carries (a part weighs what its caller says: an event of the recorder's batch,
 * or one attempt record, counts 1): the recorder's own bound on one transaction (`MAX_BATCH`), so sharing never
 * holds SQLite's write lock for more work than one instance's largest batch did.
 */
export const MAX_TURN_TRANSACTION = 256;

/**
 * A caller's part of a shared transaction: its statements, run in `trx` after the parts added before it. It must
 * use only `trx` (the store's one SQLite connection is held by the transaction) and may be run a second time, in
 * a transaction of its own, when the shared one rolled back.
 */
export type TransactionWork<R> = (trx: Transaction<Database>) => Promise<R>;

/**
 * Runs the parts of a shared transaction in `trx`. → each part's result, in the order of `parts`.
 * @throws the first error of a part (the transaction then rolls back).
 */
export type PartsRunner = (
  trx: Transaction<Database>,
  parts: readonly TransactionWork<unknown>[],
) => Promise<unknown[]>;

/**
 * Runs one part in `trx`, a transaction of the part's own, and returns its result: how a {@link TurnTransactions}
 * runs a part alone.
 */
export type PartRunner = (trx: Transaction<Database>, part: TransactionWork<unknown>) => Promise<unknown>;

/** The default {@link PartRunner}: the part itself. */
function partItself(trx: Transaction<Database>, part: TransactionWork<unknown>): Promise<unknown> {
  return part(trx);
}

/** The default {@link PartsRunner}: each part after the one before it, each to its end. */
async function partsInOrder(
  trx: Transaction<Database>,
  parts: readonly TransactionWork<unknown>[],
): Promise<unknown[]> {
  const results: unknown[] = [];
  for (const part of parts) results.push(await part(trx));
  return results;
}

/**
 * One commit for the writes of a turn of the event loop on SQLite (docs/decisions/0051-turn-groups.md): the work
 * added in a turn (the recorder's instance batches, the delivery worker's attempt records) runs at its end in one
 * transaction, in the order it was added, at most {@link MAX_TURN_TRANSACTION} in weight, and each caller gets its own
 * part's result once that transaction committed (src/ops/turn-group.ts). Every part keeps its own conditions, so
 * sharing a transaction changes when a write commits, never what it does. A shared transaction that fails is run
 * again one part per transaction, so a failing part fails only its own caller; an unreachable store
 * (docs/decisions/0011-store-faults.md) fails each caller at once, and each retries as it would have alone.
 * Shared by every writer on SQLite only: its one connection runs transactions one after the other anyway, while
 * PostgreSQL's run side by side on the pool; there only the recorder's batches share one, whose statements are
 * shared too (`recorderTurns`, src/store/recorder-turns.ts, docs/decisions/0082-recorder-turns-on-postgres.md).
 */
export class TurnTransactions {
  readonly #group: TurnGroup<TransactionWork<unknown>, unknown>;

  /**
   * Runs on `db`; no I/O until the first {@link run}. `together` runs a group's parts (at least two) in the shared
   * transaction and returns their results in order: by default one after the other, each to its end
   * (`recorderTurns`, src/store/recorder-turns.ts, shares their statements too). `alone` runs a part that is alone
   * in its turn, or tried again alone after its group failed, in a transaction of its own: by default the part as it
   * is.
   */
  constructor(db: Kysely<Database>, together: PartsRunner = partsInOrder, alone: PartRunner = partItself) {
    this.#group = new TurnGroup<TransactionWork<unknown>, unknown>(
      {
        together: (parts) => db.transaction().execute((trx) => together(trx, parts)),
        alone: (part) => db.transaction().execute((trx) => alone(trx, part)),
        failsEach: isStoreUnavailableError,
      },
      MAX_TURN_TRANSACTION,
    );
  }

  /**
   * Runs `work` in this turn's shared transaction; `weight` (default 1) is what it counts against
   * {@link MAX_TURN_TRANSACTION}: a part heavier than that runs alone.
   * @returns what `work` returned, once the transaction holding it committed.
   * @throws what `work` throws when run alone (nothing of it is kept), or the store's error.
   */
  run<R>(work: TransactionWork<R>, weight = 1): Promise<R> {
    // The group holds parts of several result types; this part's result is the one its own `work` returned.
    return this.#group.add(work, weight) as Promise<R>;
  }
}
