import { type DomainError, errors } from '../domain/errors.ts';
import type { SentMessage } from '../domain/messages.ts';
import { type WaitSignal, Withdrawal } from '../domain/withdrawal.ts';
import type { SendJob } from '../store/send-jobs.ts';

/**
 * The answer of a synchronous send for a job an earlier forward of the same request stored under the forward's id
 * (docs/decisions/0009-sends-as-jobs.md, docs/decisions/0008-leases-and-fencing.md): its result once sent, a
 * conflict once failed or canceled, else the wait for its outcome.
 *
 * The wait is registered first and the job read again after it (`reread`): a relay that ended between the
 * caller's read and the registration settled no waiter, and its outcome is in the store. Then this request's own
 * wait is withdrawn (`wait`'s signal aborted; other requests waiting for the job keep theirs) and the stored outcome
 * answers. A job still `pending` or `sending`, or a read that fails, leaves the wait in place.
 *
 * @param wait registers a wait for the job's outcome that ends, rejected, when its signal aborts
 *   (`SendQueue.waitFor`).
 * @param reread reads the job's row again (undefined when gone).
 * @throws DomainError conflict `message already failed` or `message already canceled`; what `wait` rejects with.
 */
export async function storedOutcome(
  job: SendJob,
  wait: (job: SendJob, signal: WaitSignal) => Promise<SentMessage>,
  reread: () => Promise<SendJob | undefined>,
): Promise<SentMessage> {
  const ended = endedAnswer(job);
  if (ended !== undefined) {
    if ('sent' in ended) return ended.sent;
    throw ended.error;
  }
  const withdraw = new Withdrawal();
  const done = wait(job, withdraw);
  // The wait may end (its client gone) while the job is read again: its rejection is the caller's, once returned.
  done.catch(() => undefined);
  const now = await reread().catch(() => undefined);
  if (now === undefined || endedAnswer(now) === undefined) return done;
  withdraw.withdraw(new DOMException('This operation was aborted', 'AbortError'));
  return storedOutcome(now, wait, reread);
}

/**
 * What an ended job answers a synchronous send that waits for it: its result once `sent` (the time it was sent), a
 * conflict `message already failed` or `message already canceled`; undefined while `pending` or `sending`.
 */
export function endedAnswer(job: SendJob): { sent: SentMessage } | { error: DomainError } | undefined {
  switch (job.status) {
    case 'sent':
      return { sent: { id: job.id, timestamp: job.sentAt ?? job.createdAt } };
    case 'failed':
    case 'canceled':
      return { error: errors.conflict(`message already ${job.status}`) };
    default:
      return undefined;
  }
}
