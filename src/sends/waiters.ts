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
  readonly #waiters = new Map<string, Waiter[]>();

  /**
   * A promise of job `job`'s result, settled by {@link settle}. Several requests may wait for one job (a send
   * forwarded again while its first forward still waits, docs/decisions/0008-leases-and-fencing.md): each is settled.
   * When `signal` aborts first, this wait alone is withdrawn and rejects with the signal's reason.
   */
  await(job: JobKey, signal?: AbortSignal): Promise<SentMessage> {
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

  /** Resolves the waiters of `job` with `sent`, or rejects them with `error` without; a no-op when none waits. */
  settle(job: JobKey, sent: SentMessage | undefined, error?: unknown): void {
    const key = `${job.instanceId}/${job.id}`;
    const waiting = this.#waiters.get(key);
    if (!waiting) return;
    this.#waiters.delete(key);
    for (const waiter of waiting) {
      if (sent) waiter.resolve(sent);
      else waiter.reject(error);
    }
  }
}
