import type { Kysely } from 'kysely';
import { atTurnEnd } from '../ops/turn-end.ts';
import type { Database } from '../store/schema.ts';
import { insertSendJob, insertSendJobs, type NewSendJob } from '../store/send-jobs.ts';

/**
 * Most jobs one group insert writes (16 bound values a row: far below SQLite's and PostgreSQL's limits on the
 * parameters of one statement).
 */
export const MAX_GROUP_INSERT = 200;

/**
 * The group commit of new send jobs (docs/decisions/0009-sends-as-jobs.md: a send is stored before its relay): the
 * jobs accepted in one turn of the event loop are written together at its end (src/ops/turn-end.ts), at most {@link MAX_GROUP_INSERT} a statement,
 * and each caller resolves once that commit holds its row. The send queue (queue.ts `SendQueue.store`) owns one.
 */
export class GroupInsert {
  readonly #db: Kysely<Database>;
  /** Jobs accepted in this turn of the event loop, waiting for their group insert, with their callers. */
  #inserts: { job: NewSendJob; resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** A group insert is being written; the jobs accepted meanwhile wait for it, then form the next group. */
  #flushing = false;

  /** Writes to `db`; no I/O until the first {@link store}. */
  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /**
   * Stores a new job with the others of this turn of the event loop, in one statement and one transaction. A failed
   * group is written again one job at a time, so one bad row fails only its own send.
   * @throws the store's error for this job (store faults as `store_unavailable`, docs/decisions/0011-store-faults.md).
   */
  store(job: NewSendJob): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#inserts.push({ job, resolve, reject });
      if (this.#inserts.length === 1 && !this.#flushing) atTurnEnd(() => void this.#flushInserts());
    });
  }

  async #flushInserts(): Promise<void> {
    const group = this.#inserts.splice(0, MAX_GROUP_INSERT);
    this.#flushing = true;
    try {
      await insertSendJobs(
        this.#db,
        group.map((item) => item.job),
      );
      for (const item of group) item.resolve();
    } catch (error) {
      if (group.length === 1) {
        group[0]?.reject(error);
        return;
      }
      for (const item of group) {
        try {
          await insertSendJob(this.#db, item.job);
          item.resolve();
        } catch (single) {
          item.reject(single);
        }
      }
    } finally {
      // One group at a time: a later group committing first could let a later job of an instance be claimed
      // before an earlier one is visible. What arrived meanwhile is the next group.
      this.#flushing = false;
      if (this.#inserts.length > 0) atTurnEnd(() => void this.#flushInserts());
    }
  }
}
