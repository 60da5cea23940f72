import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { TurnGroup } from '../ops/turn-group.ts';
import { isStoreUnavailableError, outcomeUnknown } from '../store/faults.ts';
import type { Database } from '../store/schema.ts';
import {
  insertAcceptedSendJobs,
  type LateFailure,
  type NewSendJob,
  storeSendJobOnce,
} from '../store/send-jobs.ts';

/**
 * Most jobs one group insert writes (16 bound values a row: far below SQLite's and PostgreSQL's limits on the
 * parameters of one statement).
 */
export const MAX_GROUP_INSERT = 200;

/**
 * How one job's write in its group ended: stored, refused (its instance's account changed since its send was
 * accepted: nothing stored), or outcome unknown (the answer lost, `outcomeUnknown`).
 */
type Written = 'stored' | 'refused' | 'unknown';

/**
 * The group commit of new send jobs (docs/decisions/0009-sends-as-jobs.md: a send is stored before its relay): the
 * jobs accepted in one turn of the event loop are written together at its end (src/ops/turn-group.ts), at most
 * {@link MAX_GROUP_INSERT} a statement, and each caller resolves once that commit holds its row. A job whose
 * instance's account generation moved since its send was accepted (a logout committed) is refused in the same
 * transaction, and the others are stored (send-jobs.ts `insertAcceptedSendJobs`,
 * docs/decisions/0074-logout-cancels-pending-sends.md). The send queue (queue.ts `SendQueue.store`) owns one.
 *
 * A write whose connection broke after its statement went out has an unknown outcome (src/store/faults.ts
 * `outcomeUnknown`): the store may have committed the rows and only the answer was lost. Answering 503 then would
 * tell the client a stored send failed, and its retry would send the message twice; so such a job is written again
 * with {@link storeSendJobOnce} (its own row, found, counts as stored), waiting out the unreachable store until it
 * answers or the queue stops, outside the group so that later jobs are not held behind it
 * (docs/decisions/0011-store-faults.md). A write that failed with its outcome known (no connection could be had, or
 * the store answered with its error) fails at once, every job of its group alike.
 */
export class GroupInsert {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;
  readonly #untilStored: <T>(work: () => Promise<T>) => Promise<T>;
  readonly #group: TurnGroup<NewSendJob, Written>;
  /** Jobs of a group whose write ended with its outcome unknown, until their group settles them. */
  readonly #unknown = new WeakSet<NewSendJob>();

  /**
   * Writes to `db`; no I/O until the first {@link store}. `untilStored` runs a store call, waiting out an
   * unreachable store (the queue's own, bounded by its stop); `clock` tells a write again whether it is late.
   */
  constructor(db: Kysely<Database>, clock: Clock, untilStored: <T>(work: () => Promise<T>) => Promise<T>) {
    this.#db = db;
    this.#clock = clock;
    this.#untilStored = untilStored;
    // One group at a time (TurnGroup): a later group committing first could let a later job of an instance be
    // claimed before an earlier one is visible.
    this.#group = new TurnGroup<NewSendJob, Written>(
      {
        together: async (jobs) => {
          let refused: ReadonlySet<NewSendJob>;
          try {
            refused = await insertAcceptedSendJobs(db, jobs);
          } catch (error) {
            if (outcomeUnknown(error)) for (const job of jobs) this.#unknown.add(job);
            throw error;
          }
          return jobs.map((job): Written => (refused.has(job) ? 'refused' : 'stored'));
        },
        alone: async (job) => {
          if (this.#unknown.delete(job)) return 'unknown';
          try {
            const refused = await insertAcceptedSendJobs(db, [job]);
            return refused.has(job) ? 'refused' : 'stored';
          } catch (error) {
            if (outcomeUnknown(error)) return 'unknown';
            throw error;
          }
        },
        // Each job alone would fail the same way: no connection, or the store's own refusal of the moment.
        failsEach: (error) => isStoreUnavailableError(error) && !outcomeUnknown(error),
      },
      MAX_GROUP_INSERT,
    );
  }

  /**
   * Stores a new job with the others of this turn of the event loop, in one statement and one transaction. A failed
   * group is written again one job at a time, so one bad row fails only its own send.
   * @param late for a synchronous job: from when a write again stores it failed unsent instead (its wait over).
   * @returns `stored` when the row holds the job as written (`pending`, or `sending` held by its `claimedBy` with
   *   one attempt); `moved` when an answer was lost and a relay changed the job before the write again found it
   *   (claimed, handed back or ended, here or on another node): its outcome is then the relay's; `failed` when the
   *   write again came after `late.at` and stored the job failed unsent; `refused` when the instance's account
   *   generation is no longer the job's `account` (a logout committed since its send was accepted): nothing is
   *   stored, and the other jobs of its group are (docs/decisions/0074-logout-cancels-pending-sends.md).
   * @throws the store's error for this job (store faults as `store_unavailable` when its outcome is known, or the
   *   queue stopped while the store was away: docs/decisions/0011-store-faults.md).
   */
  async store(job: NewSendJob, late?: LateFailure): Promise<'stored' | 'moved' | 'failed' | 'refused'> {
    const written = await this.#group.add(job);
    if (written !== 'unknown') return written;
    const found = await this.#untilStored(() => storeSendJobOnce(this.#db, job, this.#clock(), late));
    return found === 'found' ? 'stored' : found;
  }
}
