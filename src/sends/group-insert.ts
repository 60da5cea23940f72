import type { Kysely } from 'kysely';
import { TurnGroup } from '../ops/turn-group.ts';
import { failedBeforeSending, isStoreUnavailableError } from '../store/faults.ts';
import type { Database } from '../store/schema.ts';
import { insertSendJob, insertSendJobs, type NewSendJob, storeSendJobOnce } from '../store/send-jobs.ts';

/**
 * Most jobs one group insert writes (16 bound values a row: far below SQLite's and PostgreSQL's limits on the
 * parameters of one statement).
 */
export const MAX_GROUP_INSERT = 200;

/**
 * The group commit of new send jobs (docs/decisions/0009-sends-as-jobs.md: a send is stored before its relay): the
 * jobs accepted in one turn of the event loop are written together at its end (src/ops/turn-group.ts), at most
 * {@link MAX_GROUP_INSERT} a statement, and each caller resolves once that commit holds its row. The send queue
 * (queue.ts `SendQueue.store`) owns one.
 *
 * A write whose connection was lost after its statement went out has an unknown outcome: the store may have
 * committed the rows and only the answer was lost. Answering 503 then would tell the client a stored send failed,
 * and its retry would send the message twice; so such a job is written again with {@link storeSendJobOnce} (its
 * own row, found, counts as stored), waiting out the unreachable store until it answers or the queue stops
 * (docs/decisions/0011-store-faults.md). Only a write that failed before reaching the store (no connection could be
 * had) answers the store's error at once.
 */
export class GroupInsert {
  readonly #group: TurnGroup<NewSendJob, undefined>;
  /** Jobs of a group whose write ended with its outcome unknown, until they are written again alone. */
  readonly #unknown = new WeakSet<NewSendJob>();

  /**
   * Writes to `db`; no I/O until the first {@link store}. `untilStored` runs a store call, waiting out an
   * unreachable store (the queue's own, bounded by its stop).
   */
  constructor(db: Kysely<Database>, untilStored: <T>(work: () => Promise<T>) => Promise<T>) {
    const again = async (job: NewSendJob): Promise<undefined> => {
      this.#unknown.delete(job);
      await untilStored(() => storeSendJobOnce(db, job));
      return undefined;
    };
    // One group at a time (TurnGroup): a later group committing first could let a later job of an instance be
    // claimed before an earlier one is visible.
    this.#group = new TurnGroup<NewSendJob, undefined>(
      {
        together: async (jobs) => {
          try {
            await insertSendJobs(db, jobs);
          } catch (error) {
            if (outcomeUnknown(error)) for (const job of jobs) this.#unknown.add(job);
            throw error;
          }
          return jobs.map(() => undefined);
        },
        alone: async (job) => {
          if (this.#unknown.has(job)) return again(job);
          try {
            await insertSendJob(db, job);
          } catch (error) {
            if (!outcomeUnknown(error)) throw error;
            return again(job);
          }
          return undefined;
        },
      },
      MAX_GROUP_INSERT,
    );
  }

  /**
   * Stores a new job with the others of this turn of the event loop, in one statement and one transaction. A failed
   * group is written again one job at a time, so one bad row fails only its own send.
   * @throws the store's error for this job (store faults as `store_unavailable` when no connection could be had or
   *   the queue stopped while the store was away, docs/decisions/0011-store-faults.md).
   */
  store(job: NewSendJob): Promise<void> {
    return this.#group.add(job);
  }
}

/** True when `error` left a write's outcome unknown: the store became unreachable after the statement went out. */
function outcomeUnknown(error: unknown): boolean {
  return isStoreUnavailableError(error) && !failedBeforeSending(error);
}
