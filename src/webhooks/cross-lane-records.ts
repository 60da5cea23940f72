import type { Kysely } from 'kysely';
import { extended } from '../domain/objects.ts';
import { TurnGroup } from '../ops/turn-group.ts';
import { type FinishResult, finishAndStartNext } from '../store/delivery-finish.ts';
import { deliveredGroupInOneStatement, type GroupRecord } from '../store/delivery-group.ts';
import { isStoreUnavailableError } from '../store/faults.ts';
import type { Database } from '../store/schema.ts';

/**
 * Most records one statement writes for several lanes: the bound of the turn's shared transaction on SQLite
 * (`MAX_TURN_TRANSACTION`, src/store/turn-transactions.ts), so one statement never holds more rows locked than a
 * turn's transaction would.
 */
export const MAX_RECORDS_TOGETHER = 256;

/**
 * The delivered records of every lane of a worker answered in the same turn of the event loop, written in one
 * statement on PostgreSQL (docs/decisions/0081-record-statements-across-lanes.md): where each lane's records were
 * one statement on the pool, each executed, committed and answered alone, the lanes of a turn now share one
 * statement and one commit (`deliveredGroupInOneStatement`, src/store/delivery-group.ts, with each lane's start
 * order kept within the lane). A turn with one lane's records only writes them as before: one record by the
 * single-record statement (`finishAndStartNext`, src/store/delivery-finish.ts), several by the lane's group
 * statement. One statement is written at a time; the records answered meanwhile form the next.
 *
 * Failures keep each lane's own handling: a statement that fails for a reason other than an unreachable store is
 * written again one lane at a time (src/ops/turn-group.ts), so a lane whose records cannot be written fails alone;
 * an unreachable store fails every lane's write at once, and each lane then writes its records one by one as it
 * did before, asking for each record that offered a start whether the lost statement made it
 * (src/webhooks/lane-records.ts).
 */
export class CrossLaneRecords {
  readonly #group: TurnGroup<readonly GroupRecord[], FinishResult[]>;

  /** Writes through `db` (a PostgreSQL store's); no I/O until the first {@link write}. */
  constructor(db: Kysely<Database>) {
    this.#group = new TurnGroup<readonly GroupRecord[], FinishResult[]>(
      {
        together: (lanes) => writeLanes(db, lanes),
        alone: (lane) => writeLane(db, lane),
        failsEach: isStoreUnavailableError,
      },
      MAX_RECORDS_TOGETHER,
    );
  }

  /**
   * Writes one lane's group of delivered records (at least one; each `delivered`, none a check, none offered before,
   * as `deliveredGroupInOneStatement` requires, the worker's own) with the other lanes' of this turn. The records'
   * `lane` is set here; each `input.now` is the statement's time, the first record's of the turn.
   * @returns one result per record, in the order given, once the statement holding them committed.
   * @throws the store's error (the lane's write then goes on one record at a time); a RangeError for records the
   *   statement does not take.
   */
  write(records: readonly GroupRecord[]): Promise<FinishResult[]> {
    return this.#group.add(records, records.length);
  }
}

/** One lane's records alone: the single-record statement for one, the lane's group statement for more. */
async function writeLane(db: Kysely<Database>, records: readonly GroupRecord[]): Promise<FinishResult[]> {
  const [only] = records;
  if (records.length === 1 && only !== undefined)
    return [await finishAndStartNext(db, only.input, 'postgres')];
  return deliveredGroupInOneStatement(db, records);
}

/** Several lanes' records in one statement, each lane numbered by its place; → each lane's results. */
async function writeLanes(
  db: Kysely<Database>,
  lanes: readonly (readonly GroupRecord[])[],
): Promise<FinishResult[][]> {
  const now = lanes[0]?.[0]?.input.now;
  const records = lanes.flatMap((records, lane) =>
    records.map((record) => ({
      input: now === undefined ? record.input : extended(record.input, { now }),
      takes: record.takes,
      lane,
    })),
  );
  const results = await deliveredGroupInOneStatement(db, records);
  const byLane: FinishResult[][] = [];
  let at = 0;
  for (const records of lanes) {
    byLane.push(results.slice(at, at + records.length));
    at += records.length;
  }
  return byLane;
}
