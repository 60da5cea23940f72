import { type GroupWriter, TurnGroup } from '../ops/turn-group.ts';
import type { Store } from '../store/database.ts';
import {
  type FinishInput,
  type FinishResult,
  finishAndStartNext,
  finishAttemptsTogether,
} from '../store/delivery-finish.ts';
import { isStoreUnavailableError } from '../store/faults.ts';

/** Most attempt records one group writes in its transaction. */
export const MAX_RECORD_GROUP = 64;

/**
 * The group commit of attempt records (docs/decisions/0051-turn-groups.md): on SQLite, the records the delivery
 * worker asks for in one turn of the event loop are written together in one transaction (src/ops/turn-group.ts),
 * at most {@link MAX_RECORD_GROUP} of them, and each caller gets its own record's result once that transaction
 * committed. Every record keeps its own conditions (the claim still held, the lane unchanged), so a group changes
 * when a record commits, never what it does. On PostgreSQL each record is written on its own: a delivered one is a
 * single statement there (src/store/delivery-next.ts).
 */
export class RecordGroup {
  readonly #store: Store;
  readonly #group: TurnGroup<FinishInput, FinishResult>;

  /** Writes to `store`; no I/O until the first {@link record}. */
  constructor(store: Store) {
    this.#store = store;
    const writer: GroupWriter<FinishInput, FinishResult> = {
      together: (inputs) => finishAttemptsTogether(store.db, inputs),
      alone: (input) => finishAndStartNext(store.db, input, store.dialect),
      failsEach: isStoreUnavailableError,
    };
    this.#group = new TurnGroup(writer, MAX_RECORD_GROUP);
  }

  /**
   * Records one attempt (`finishAndStartNext`), with the others of this turn on SQLite.
   * @returns the record's result, as `finishAndStartNext` returns it.
   * @throws what `finishAndStartNext` throws for this record: a group that fails for another reason than an
   *   unreachable store is written again one record at a time, so a bad record fails only its own caller.
   */
  record(input: FinishInput): Promise<FinishResult> {
    const { db, dialect } = this.#store;
    if (dialect !== 'sqlite') return finishAndStartNext(db, input, dialect);
    return this.#group.add(input);
  }
}
