import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import type { SentMessage } from '../domain/messages.ts';
import type { Database } from '../store/schema.ts';
import { failPendingSendJob } from '../store/send-job-claims.ts';
import type { JobKey, SendWaiters } from './waiters.ts';

/**
 * How long a synchronous send waits in its instance's queue before it is failed unsent, ms: about the time an
 * HTTP client waits for an answer. A send relayed at once never waits here.
 */
export const SYNC_WAIT_MS = 60_000;

/** Wait before trying again to fail an expired job the store could not fail, ms. */
const RETRY_MS = 5_000;

/** What {@link SyncDeadlines} needs from the send queue (queue.ts `SendQueue`). */
export interface SyncDeadlinesDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: FastifyBaseLogger;
  /** The requests waiting for a job's outcome. */
  waiters: SendWaiters;
  /** The longest wait of a queued synchronous send, ms. */
  waitMs: number;
}

/**
 * The deadline of a synchronous send that waits its turn in the queue (docs/decisions/0009-sends-as-jobs.md): when
 * it has not been claimed for a relay within `waitMs` (the session away, a long queue or pace), the job is failed
 * while still `pending` and its requests answer `504 timeout`, so it never goes out later, after its client stopped
 * waiting and perhaps sent it again. A job a relay claimed before the deadline keeps its wait: the relay answers.
 */
export class SyncDeadlines {
  readonly #deps: SyncDeadlinesDeps;

  /** Cheap, no I/O. */
  constructor(deps: SyncDeadlinesDeps) {
    this.#deps = deps;
  }

  /**
   * `done` (the wait for job `job`'s outcome), failed unsent at the deadline while the job is still pending.
   * @throws what `done` rejects with; DomainError `timeout` when the deadline failed the job.
   */
  async watch(job: JobKey, done: Promise<SentMessage>): Promise<SentMessage> {
    let timer: NodeJS.Timeout | undefined;
    const expire = async (): Promise<void> => {
      const { db, clock, logger, waiters, waitMs } = this.#deps;
      const message = `the message could not be relayed within ${Math.ceil(waitMs / 1000)} s and was not sent`;
      try {
        if (await failPendingSendJob(db, job.instanceId, job.id, clock(), message))
          waiters.settle(job, undefined, new DomainError('timeout', message));
      } catch (error) {
        // The job may still go out: its request keeps waiting, and the deadline is tried again.
        logger.warn({ err: error, instanceId: job.instanceId, id: job.id }, 'failing an expired send failed');
        if (waiters.has(job)) timer = setTimeout(() => void expire(), RETRY_MS);
      }
    };
    timer = setTimeout(() => void expire(), this.#deps.waitMs);
    try {
      return await done;
    } finally {
      clearTimeout(timer);
    }
  }
}
