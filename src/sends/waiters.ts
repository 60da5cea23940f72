import type { SentMessage } from '../domain/messages.ts';
import type { SendJob } from '../store/send-jobs.ts';

/** A job as the waiters know it: its instance and id. */
export type JobKey = Pick<SendJob, 'instanceId' | 'id'>;

interface Waiter {
  resolve(sent: SentMessage): void;
  reject(error: unknown): void;
}

/**
 * The requests of this process that wait for a send job's outcome (synchronous sends,
 * docs/decisions/0009-sends-as-jobs.md), by instance and job id. The send queue (queue.ts) settles them.
 */
export class SendWaiters {
  readonly #waiters = new Map<string, Waiter>();

  /** A promise of job `job`'s result, settled by {@link settle}; replaces an earlier waiter of the same job. */
  await(job: JobKey): Promise<SentMessage> {
    return new Promise<SentMessage>((resolve, reject) => {
      this.#waiters.set(`${job.instanceId}/${job.id}`, { resolve, reject });
    });
  }

  /** True when a request waits for job `job`. */
  has(job: JobKey): boolean {
    return this.#waiters.has(`${job.instanceId}/${job.id}`);
  }

  /** Resolves the waiter of `job` with `sent`, or rejects it with `error` without; a no-op when none waits. */
  settle(job: JobKey, sent: SentMessage | undefined, error?: unknown): void {
    const key = `${job.instanceId}/${job.id}`;
    const waiter = this.#waiters.get(key);
    if (!waiter) return;
    this.#waiters.delete(key);
    if (sent) waiter.resolve(sent);
    else waiter.reject(error);
  }
}
