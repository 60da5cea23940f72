import type { Kysely } from 'kysely';
import { takeHeldReceipts } from '../store/held-receipts.ts';
import type { Database } from '../store/schema.ts';
import { finishSendJob } from '../store/send-job-claims.ts';
import { findSendJob, type SendJob } from '../store/send-jobs.ts';
import type { ReportedWrite, SendStatusReport } from './queue-deps.ts';
import type { SendWaiters } from './waiters.ts';

/** A claimed job's outcome as src/store/send-job-claims.ts `finishSendJob` writes it (times epoch ms). */
export type JobOutcome = Parameters<typeof finishSendJob>[4];

/** What {@link finishJob} needs from the send queue (relay.ts `JobRelayDeps`, failures.ts `RelayFailuresDeps`). */
export interface FinishJobDeps {
  db: Kysely<Database>;
  /** This node's id: the `locked_by` of the jobs it finishes. */
  nodeId: string;
  /** Runs a store call, waiting out a store that cannot be reached until the queue stops. */
  untilStored: <T>(work: () => Promise<T>) => Promise<T>;
  /** Runs `write` in a transaction that records its `MessageStatus` reports with it. */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
  /**
   * The requests waiting for a job's outcome: while one waits, its answer carries the outcome instead of an event, and
   * the outcome is noted as owed to it (`carryOutcome`) for the caller's `settle` to hand back if it leaves first.
   */
  waiters: Pick<SendWaiters, 'carryOutcome'>;
}

/**
 * Ends claimed job `job` with `outcome` (src/store/send-job-claims.ts `finishSendJob`), waiting out an unreachable
 * store, with its `MessageStatus` event `report` in the same transaction when no request waits to carry the outcome
 * (docs/decisions/0076-status-with-its-write.md). The waiters are asked at each try, after the write changed the job:
 * a request may leave while the store is waited out. An outcome left out for a waiting request is noted as owed to
 * it (waiters.ts `carryOutcome`): the caller must `settle` the job's waiters after this returns true and record the
 * event `settle` hands back, which it does when the request left before the outcome reached it (even while this
 * transaction committed).
 *
 * The receipts held for the job (src/store/held-receipts.ts: they came before its message was recorded, and its
 * message was recorded without its `sent` mark, or not at all) are taken in the same transaction and recorded after
 * its outcome, so they are applied and reported (docs/decisions/0104-receipts-before-their-send.md).
 *
 * A write that finds the job no longer this node's `sending` job is either another holder's (a lost lease,
 * docs/decisions/0008-leases-and-fencing.md) or a try again after a commit whose answer was lost
 * (docs/decisions/0011-store-faults.md): when `lostAnswer` is given, the job's row is read again and `lostAnswer`
 * tells whether it shows this write (its event committed with it).
 * @returns true when this write ended the job (or `lostAnswer` found it written); false when the job was no longer
 *   this node's.
 * @throws the store's error once `untilStored` gives up (the queue stops).
 */
export async function finishJob(
  deps: FinishJobDeps,
  job: SendJob,
  outcome: JobOutcome,
  report: SendStatusReport,
  lostAnswer?: (row: SendJob) => boolean,
): Promise<boolean> {
  const { db, nodeId, untilStored, recordWith, waiters } = deps;
  return untilStored(async () => {
    const mine = await recordWith(job.instanceId, async (trx) => {
      const finished = await finishSendJob(trx, job.instanceId, job.id, nodeId, outcome);
      if (finished === undefined) return { result: false, reports: [] };
      // Receipts held for the job (its message was not recorded with its mark) are reported after its outcome.
      const events = finished.held ? await takeHeldReceipts(trx, job.instanceId, [job.id]) : [];
      return { result: true, reports: waiters.carryOutcome(job, report) ? [] : [report], events };
    });
    if (mine || lostAnswer === undefined) return mine;
    const row = await findSendJob(db, job.instanceId, job.id);
    return row !== undefined && lostAnswer(row);
  });
}
