import type { Kysely } from 'kysely';
import { TurnGroup } from '../ops/turn-group.ts';
import type { Database } from '../store/schema.ts';
import { insertSendJob, insertSendJobs, type NewSendJob } from '../store/send-jobs.ts';

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
 */
export class GroupInsert {
  readonly #group: TurnGroup<NewSendJob, undefined>;

  /** Writes to `db`; no I/O until the first {@link store}. */
  constructor(db: Kysely<Database>) {
    // One group at a time (TurnGroup): a later group committing first could let a later job of an instance be
    // claimed before an earlier one is visible.
    this.#group = new TurnGroup<NewSendJob, undefined>(
      {
        together: async (jobs) => {
          await insertSendJobs(db, jobs);
          return jobs.map(() => undefined);
        },
        alone: async (job) => {
          await insertSendJob(db, job);
          return undefined;
        },
      },
      MAX_GROUP_INSERT,
    );
  }

  /**
   * Stores a new job with the others of this turn of the event loop, in one statement and one transaction. A failed
   * group is written again one job at a time, so one bad row fails only its own send.
   * @throws the store's error for this job (store faults as `store_unavailable`, docs/decisions/0011-store-faults.md).
   */
  store(job: NewSendJob): Promise<void> {
    return this.#group.add(job);
  }
}
