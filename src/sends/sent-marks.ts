import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import { rideWithAdvance } from '../store/advance-marks.ts';
import { isPostgres } from '../store/compiled.ts';
import { takeHeldReceipts } from '../store/held-receipts.ts';
import type { Database } from '../store/schema.ts';
import { type MarkedJob, markSendJobsSent } from '../store/send-job-marks.ts';

/** A job of an instance, by id. */
type JobRef = { instanceId: string; id: string };

/**
 * The send queue's part in the event recorder's transactions (docs/decisions/0009-sends-as-jobs.md,
 * 0012-session-and-message-status-events.md): a relayed job is marked `sent` in the transaction that records its
 * `message` event, so the message row and the job's outcome commit together, and a queued send's `MessageStatus`
 * `sent` event is derived there too. It remembers which jobs it marked until their relay asks
 * ({@link SentMarks.takeRecorded}), so the relay does not finish them a second time.
 */
export class SentMarks {
  /**
   * The jobs {@link mark} marked sent in a transaction (their ids, each with its job's mode and whether receipts are
   * held for it) and when (epoch ms).
   */
  readonly #marked = new WeakMap<Transaction<Database>, { at: number; jobs: Map<string, MarkedJob> }>();
  /**
   * Jobs (`instanceId/id`) whose `message` event {@link derive} took, or whose job a mark riding on the advance
   * marked, in a transaction not committed yet: they count as recorded only once {@link committed} saw it commit (a
   * transaction rolled back after the derive leaves them here until the instance's next {@link mark} of the same job
   * or {@link takeRecorded} clears them).
   */
  readonly #deriving = new Set<string>();
  /**
   * Jobs (`instanceId/id`) a mark riding on the advance marked in a transaction not committed yet, with their `sent`
   * time (epoch ms): a request waited for each when the mark was noted, so their outcome is its to carry.
   */
  readonly #carried = new Map<string, number>();
  /** Jobs (`instanceId/id`) whose `message` event and `sent` mark committed, awaiting {@link takeRecorded}. */
  readonly #recorded = new Set<string>();

  /**
   * Marks `sent` at `clock()` (epoch ms, read only when the batch holds own messages) the jobs of the batch's own
   * `message` events that are being relayed; {@link derive} then reads the outcome per event. What an earlier batch
   * of the same transaction marked and did not take is forgotten first: a transaction may hold several instances'
   * batches (docs/decisions/0051-turn-groups.md).
   *
   * On PostgreSQL, when `waited` says a request waits for every one of those jobs, no `MessageStatus` event can
   * follow from the mark, so it rides on the sequence's advance instead of being a statement of its own
   * (docs/decisions/0087-sent-marks-with-the-advance.md, src/store/advance-marks.ts): the advance's statement marks
   * the jobs and answers which, and the jobs it marked count as recorded once the transaction commits, their outcome
   * owed to their requests from then on ({@link committed}). Otherwise the mark is one statement in `trx`, now.
   * @throws what the store throws (the recorder's transaction rolls back).
   */
  async mark(
    trx: Transaction<Database>,
    instanceId: string,
    events: readonly EngineEvent[],
    clock: () => number,
    waited?: (job: JobRef) => boolean,
  ): Promise<void> {
    this.#marked.delete(trx);
    const ids = events.flatMap((event) =>
      event.type === 'message' && event.message.source.isFromMe ? [event.message.id] : [],
    );
    if (ids.length === 0) return;
    // What an earlier transaction of the instance took for these jobs and then rolled back (the instance's batches
    // run one at a time, so none is still open): this batch decides their outcome afresh.
    for (const id of ids) {
      this.#deriving.delete(`${instanceId}/${id}`);
      this.#carried.delete(`${instanceId}/${id}`);
    }
    const at = clock();
    if (waited !== undefined && isPostgres(trx) && ids.every((id) => waited({ instanceId, id }))) {
      rideWithAdvance(trx, {
        instanceId,
        ids,
        at,
        answer: (marked) => {
          for (const id of marked) {
            const key = `${instanceId}/${id}`;
            this.#deriving.add(key);
            this.#carried.set(key, at);
          }
        },
      });
      return;
    }
    this.#marked.set(trx, { at, jobs: await markSendJobsSent(trx, instanceId, ids, at) });
  }

  /**
   * For a recorded own `message` whose job {@link mark} marked sent in `trx`: a queued send's `MessageStatus`
   * `sent` event (none when `carriedByRequest`, given the job and its `sent` time, says a request waits for the
   * outcome: its answer carries it), then the receipts held for the job, taken from the store (src/store/
   * held-receipts.ts: they came before its message was recorded, docs/decisions/0104-receipts-before-their-send.md),
   * so they are applied to the message and reported after it.
   * Each job's outcome is taken once: a message the batch holds twice (an echo) has one. Other events yield none.
   * @throws the store's error (the recorder's transaction rolls back).
   */
  async derive(
    trx: Transaction<Database>,
    instanceId: string,
    event: EngineEvent,
    carriedByRequest: (job: JobRef, at: number) => boolean,
  ): Promise<EngineEvent[]> {
    if (event.type !== 'message' || !event.message.source.isFromMe) return [];
    const marked = this.#marked.get(trx);
    const job = marked?.jobs.get(event.message.id);
    if (marked === undefined || job === undefined) return [];
    marked.jobs.delete(event.message.id);
    this.#deriving.add(`${instanceId}/${event.message.id}`);
    const held = job.held ? await takeHeldReceipts(trx, instanceId, [event.message.id]) : [];
    if (carriedByRequest({ instanceId, id: event.message.id }, marked.at)) return held;
    return [{ type: 'messageStatus', id: event.message.id, status: 'sent', at: marked.at }, ...held];
  }

  /**
   * After the recorder's transaction committed `event`: an own `message` {@link derive} took, or whose job a mark
   * riding on the advance marked, now counts recorded.
   * @returns for a job marked with the advance, its `sent` time (epoch ms): the outcome its requests carry, owed to
   *   them from now on (waiters.ts `owe`); else undefined.
   */
  committed(instanceId: string, event: EngineEvent): number | undefined {
    if (event.type !== 'message' || !event.message.source.isFromMe) return undefined;
    const key = `${instanceId}/${event.message.id}`;
    const carried = this.#carried.get(key);
    this.#carried.delete(key);
    if (!this.#deriving.delete(key)) return undefined;
    this.#recorded.add(key);
    return carried;
  }

  /**
   * True once for a job whose `message` event was recorded with its `sent` mark ({@link derive}, then
   * {@link committed}): the relay then has nothing left to finish. False when the engine recorded no message of its
   * own for the job, or the transaction that would have recorded it rolled back.
   */
  takeRecorded(job: JobRef): boolean {
    const key = `${job.instanceId}/${job.id}`;
    this.#deriving.delete(key);
    this.#carried.delete(key);
    return this.#recorded.delete(key);
  }
}
