import type { SentMessage } from '../domain/messages.ts';
import type { WaitSignal } from '../domain/withdrawal.ts';
import type { SendJob } from '../store/send-jobs.ts';
import { messageReport, type SendStatusReport } from './queue-deps.ts';

/** A job as the waiters know it: its instance and id. */
export type JobKey = Pick<SendJob, 'instanceId' | 'id'>;

interface Waiter {
  resolve(sent: SentMessage): void;
  reject(error: unknown): void;
}

/**
 * The requests of this process that wait for a send job's outcome (synchronous sends,
 * docs/decisions/0009-sends-as-jobs.md), by instance and job id. The send queue (queue.ts) settles them.
 *
 * A job's `MessageStatus` event is left out while a request waits to carry its outcome
 * (docs/decisions/0012-session-and-message-status-events.md); {@link carry} and {@link carryOutcome} note such an
 * outcome (`sent`, or a failure) as owed to the requests, and when every request has left before the outcome reached
 * them (its client went away, even while the outcome's transaction committed, or a followed wait answered `504` with
 * the outcome unknown), {@link settle} hands the outcome back to the relay, which records it as an event: the outcome
 * reaches the client either in an answer or as an event. A relay that failed after the message's transaction
 * committed finds the job `sent` in the store and settles it the same way (failures.ts).
 */
export class SendWaiters {
  readonly #waiters = new Map<string, Waiter[]>();
  /** Outcomes whose event was left out for the requests of a job (`instanceId/id` → the event left out). */
  readonly #owed = new Map<string, SendStatusReport>();

  /**
   * A promise of job `job`'s result, settled by {@link settle}. Several requests may wait for one job (a send
   * forwarded again while its first forward still waits, docs/decisions/0008-leases-and-fencing.md): each is settled.
   * When `signal` aborts first, this wait alone is withdrawn and rejects with the signal's reason.
   */
  await(job: JobKey, signal?: WaitSignal): Promise<SentMessage> {
    return new Promise<SentMessage>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const key = `${job.instanceId}/${job.id}`;
      const waiter: Waiter = { resolve, reject };
      const waiting = this.#waiters.get(key);
      if (waiting) waiting.push(waiter);
      else this.#waiters.set(key, [waiter]);
      signal?.addEventListener(
        'abort',
        () => {
          const left = this.#waiters.get(key)?.filter((other) => other !== waiter);
          if (left === undefined) return;
          if (left.length === 0) this.#waiters.delete(key);
          else this.#waiters.set(key, left);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** True when a request waits for job `job`. */
  has(job: JobKey): boolean {
    return this.#waiters.has(`${job.instanceId}/${job.id}`);
  }

  /**
   * True when a request waits for job `job`, whose outcome was marked `sent` at `at` (epoch ms) in the transaction
   * recording its message: the requests will carry that outcome, so its event is left out, and the outcome stays
   * owed to them until {@link settle}.
   */
  carry(job: JobKey, at: number): boolean {
    return this.carryOutcome(job, messageReport(job.id, 'sent', at));
  }

  /**
   * True when a request waits for job `job`, whose outcome `report` (its `MessageStatus` event: `sent`, `failed` or
   * `canceled`) is being written in a transaction that leaves the event out for the requests to carry; the outcome
   * stays owed to them until {@link settle}, which hands it back when none is left. False when none waits (the
   * transaction then records the event itself, and what an earlier, rolled-back try noted is dropped).
   */
  carryOutcome(job: JobKey, report: SendStatusReport): boolean {
    const key = `${job.instanceId}/${job.id}`;
    if (!this.#waiters.has(key)) {
      // What an earlier transaction noted and then rolled back: this one records the event itself.
      this.#owed.delete(key);
      return false;
    }
    this.#owed.set(key, report);
    return true;
  }

  /**
   * Notes the outcome of job `job`, marked `sent` at `at` (epoch ms) in a transaction that left its event out because
   * a request waited for it when the transaction began (docs/decisions/0087-sent-marks-with-the-advance.md), as owed
   * to its requests, whether or not one still waits: {@link settle} then hands it back to the relay when none is left
   * to carry it, and the relay records it as an event.
   */
  owe(job: JobKey, at: number): void {
    this.#owed.set(`${job.instanceId}/${job.id}`, messageReport(job.id, 'sent', at));
  }

  /**
   * Resolves the waiters of `job` with `sent`, or rejects them with `error` without: the job's outcome.
   * @returns the `MessageStatus` event {@link carry} or {@link carryOutcome} left out of the store for this outcome
   *   (`sent` with `sent`, a failure without) when no request is left to carry it (each went away first): the caller
   *   records it; else undefined. A noted outcome of the other kind (a rolled-back transaction's) is dropped.
   */
  settle(job: JobKey, sent: SentMessage | undefined, error?: unknown): SendStatusReport | undefined {
    const key = `${job.instanceId}/${job.id}`;
    const noted = this.#owed.get(key);
    this.#owed.delete(key);
    const owed =
      noted?.kind === 'message' && (noted.status === 'sent') === (sent !== undefined) ? noted : undefined;
    return this.#release(key, sent, error) ? undefined : owed;
  }

  /**
   * Answers the waiters of `job` with its outcome read from the store (`sent`, or `error`) on behalf of the relay
   * that ended it. An outcome {@link carry} noted is carried by them when any waits; when none is left it stays
   * owed, so the relay's own {@link settle} records it.
   */
  answer(job: JobKey, sent: SentMessage | undefined, error?: unknown): void {
    if (this.has(job)) this.settle(job, sent, error);
  }

  /**
   * Rejects the waiters of `job` with `error` without its outcome (a followed wait past its bound: the outcome is
   * not known here yet). An outcome {@link carry} noted stays owed: the relay that ends the job records it.
   */
  giveUp(job: JobKey, error: unknown): void {
    this.#release(`${job.instanceId}/${job.id}`, undefined, error);
  }

  /** Resolves the waiters under `key` with `sent`, or rejects them with `error`. @returns false when none waited. */
  #release(key: string, sent: SentMessage | undefined, error: unknown): boolean {
    const waiting = this.#waiters.get(key);
    if (!waiting) return false;
    this.#waiters.delete(key);
    for (const waiter of waiting) {
      if (sent) waiter.resolve(sent);
      else waiter.reject(error);
    }
    return true;
  }
}

/**
 * Settles the waiters of `job` with its outcome ({@link SendWaiters.settle}: `sent`, or `error` without) and, when
 * every request that was to carry the outcome has left, records the `MessageStatus` event left out for them through
 * `report` (docs/decisions/0076-status-with-its-write.md), so the outcome reaches its client in an answer or as an
 * event.
 * @throws whatever `report` throws (the queue's own waits out an unreachable store and never throws).
 */
export async function settleOwed(
  waiters: SendWaiters,
  report: (instanceId: string, report: SendStatusReport) => Promise<void>,
  job: JobKey,
  sent: SentMessage | undefined,
  error?: unknown,
): Promise<void> {
  const owed = waiters.settle(job, sent, error);
  if (owed !== undefined) await report(job.instanceId, owed);
}
