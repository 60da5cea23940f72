import type { Kysely } from 'kysely';
import type { Database } from '../store/schema.ts';
import { finishSendJob } from '../store/send-job-claims.ts';
import { findSendJob, type SendJob } from '../store/send-jobs.ts';
import type { ReportedWrite, SendStatusReport } from './queue-deps.ts';

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
}

/**
 * Ends claimed job `job` with `outcome` (src/store/send-job-claims.ts `finishSendJob`), waiting out an unreachable
 * store, with the `MessageStatus` report `report` gives in the same transaction
 * (docs/decisions/0076-status-with-its-write.md). `report` is asked at each try, after the write changed the job:
 * a request waiting to carry the outcome may leave while the store is waited out.
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
  report: () => SendStatusReport | undefined,
  lostAnswer?: (row: SendJob) => boolean,
): Promise<boolean> {
  const { db, nodeId, untilStored, recordWith } = deps;
  return untilStored(async () => {
    const mine = await recordWith(job.instanceId, async (trx) => {
      const finished = await finishSendJob(trx, job.instanceId, job.id, nodeId, outcome);
      const reported = finished ? report() : undefined;
      return { result: finished, reports: reported === undefined ? [] : [reported] };
    });
    if (mine || lostAnswer === undefined) return mine;
    const row = await findSendJob(db, job.instanceId, job.id);
    return row !== undefined && lostAnswer(row);
  });
}
