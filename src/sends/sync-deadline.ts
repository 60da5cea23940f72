import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { SentMessage } from '../domain/messages.ts';
import type { Database } from '../store/schema.ts';
import { failPendingSendJob, finishSendJob } from '../store/send-job-claims.ts';
import { findSendJob, type LateFailure, type SendJob } from '../store/send-jobs.ts';
import { endedAnswer } from './outcomes.ts';
import { messageReport, type ReportedWrite, type SendStatusReport } from './queue-deps.ts';
import { type JobKey, type SendWaiters, settleOwed } from './waiters.ts';

/**
 * How long a synchronous send waits in its instance's queue before it is failed unsent, ms: about the time an
 * HTTP client waits for an answer. A send relayed at once never waits here.
 */
export const SYNC_WAIT_MS = 60_000;

/** How often the wait for a job another holder took over reads the job's row ({@link SyncDeadlines.follow}), ms. */
export const FOLLOW_MS = 1_000;

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
  /** This node's id: the `locked_by` of the jobs its relays hold. */
  nodeId: string;
  /**
   * Runs `write` in a transaction that records its `MessageStatus` reports with it (queue-deps.ts
   * `SendQueueDeps.recordWith`). @throws the write's or the store's error.
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
  /** Records a status report (queue.ts `SendQueue.report`: any failure is logged, never thrown). */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
}

/**
 * The deadline of a synchronous send that waits its turn in the queue (docs/decisions/0009-sends-as-jobs.md): when
 * no relay ever claimed it within `waitMs` (the session away, a long queue or pace), the job is failed while still
 * `pending` with no attempt, and its requests answer `504 timeout`, so it never goes out later, after its client
 * stopped waiting and perhaps sent it again. A request that left before (its client closed its connection) leaves
 * the deadline in place: the job is failed all the same, its `MessageStatus failed` event recorded with the failure
 * since no request carries it. A job a relay of this node claimed (even one handed back since) keeps
 * its wait: the relay answers. A job another node's relay holds (the instance moved) is followed in the store for
 * another `waitMs` ({@link follow}). A job another node's deadline already ended answers from its row.
 */
export class SyncDeadlines {
  readonly #deps: SyncDeadlinesDeps;
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;

  /** Cheap, no I/O. */
  constructor(deps: SyncDeadlinesDeps) {
    this.#deps = deps;
  }

  /**
   * `done` (the wait for job `job`'s outcome), failed unsent `waitMs` after `since` (epoch ms, default now: when
   * the job was accepted) while no relay claimed it.
   * @throws what `done` rejects with; DomainError `timeout` when the deadline failed the job; DomainError conflict
   *   `message already failed` or `message already canceled` when the job ended otherwise meanwhile.
   */
  async watch(job: JobKey, done: Promise<SentMessage>, since?: number): Promise<SentMessage> {
    const { clock, waitMs } = this.#deps;
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = (delayMs: number) => {
      if (over || this.#stopped) return;
      timer = setTimeout(() => {
        if (timer) this.#timers.delete(timer);
        void this.#expire(job).then((again) => {
          if (again) arm(RETRY_MS);
        });
      }, delayMs);
      timer.unref();
      this.#timers.add(timer);
    };
    arm(Math.max(0, (since ?? clock()) + waitMs - clock()));
    // A wait that ends without the outcome (its client left, or the job ended otherwise) leaves the deadline armed,
    // so a job its client gave up on is still failed unsent at it (one that ended meanwhile is only read again).
    const sent = await done;
    over = true;
    if (timer) {
      clearTimeout(timer);
      this.#timers.delete(timer);
    }
    return sent;
  }

  /**
   * Settles the waiters of `job`, which a relay other than this request's took over (another holder after this
   * node lost its lease, docs/decisions/0008-leases-and-fencing.md, or a relay that changed it before a lost
   * answer's write found it), from its row once that relay ended it: the row is read every {@link FOLLOW_MS} ms
   * until it is `sent`, `failed` or `canceled` (answered as a forward's wait is, outcomes.ts `endedAnswer`), no
   * request waits any more, or the deadlines stop. Past `waitMs` after `since` (epoch ms: the job's acceptance, or
   * the deadline that started the follow) a job still unended, or whose row cannot be read, answers `504` with its
   * outcome unknown (it may still go out: `GET /v1/messages/{id}` shows it), so no request waits for ever on another
   * node's relay. A read that fails is tried again at the next tick until then; a row gone answers `404 message not
   * found`.
   */
  follow(job: JobKey, since: number): void {
    const { db, waiters, logger, clock, waitMs } = this.#deps;
    const next = () => {
      if (this.#stopped || !waiters.has(job)) return;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        // Past its bound a job still unended (or unreadable: the store away) answers with its outcome unknown.
        const unknownPastBound = () => {
          if (clock() < since + waitMs) return next();
          waiters.giveUp(job, new DomainError('timeout', unknownOutcome(job.id)));
        };
        findSendJob(db, job.instanceId, job.id).then(
          (row) => {
            if (!this.#settleEnded(job, row)) unknownPastBound();
          },
          (error: unknown) => {
            logger.debug(
              { err: error, instanceId: job.instanceId, id: job.id },
              'reading a followed send failed',
            );
            unknownPastBound();
          },
        );
      }, FOLLOW_MS);
      timer.unref();
      this.#timers.add(timer);
    };
    next();
  }

  /** `done` (the wait for job `job`'s outcome, accepted at `job.now`), settled by {@link follow}. */
  followed(job: JobKey & { now: number }, done: Promise<SentMessage>): Promise<SentMessage> {
    this.follow(job, job.now);
    return done;
  }

  /**
   * For a synchronous job just stored (`pending`, or claimed by `job.claimedBy` for its relay at once): when the
   * sync wait since its acceptance (`job.now`) has passed already (a store that answered slowly), fails it unsent
   * unless a relay claimed it first, so it never goes out after its client gave up. A write again after a lost
   * answer fails a late job in its own transaction instead (send-jobs.ts `storeSendJobOnce`).
   * @returns `on-time` (relay it or let it wait its turn), `failed` (answer {@link timedOut}), or `moved` (a relay
   *   holds it already: its outcome is that relay's).
   * @throws the store's error.
   */
  async failLate(job: JobKey & { now: number; claimedBy?: string }): Promise<'on-time' | 'failed' | 'moved'> {
    const { db, clock, waitMs } = this.#deps;
    if (clock() < job.now + waitMs) return 'on-time';
    const error = timeoutMessage(waitMs);
    const failed =
      job.claimedBy === undefined
        ? await failPendingSendJob(db, job.instanceId, job.id, clock(), error)
        : await finishSendJob(db, job.instanceId, job.id, job.claimedBy, {
            status: 'failed',
            at: clock(),
            error,
          });
    return failed ? 'failed' : 'moved';
  }

  /** When and with which error a write again of synchronous job `job` stores it failed unsent (send-jobs.ts). */
  lateFailure(job: { now: number }): LateFailure {
    return { at: job.now + this.#deps.waitMs, error: timeoutMessage(this.#deps.waitMs) };
  }

  /** The `504 timeout` of a synchronous send failed unsent at its deadline. */
  timedOut(): DomainError {
    return new DomainError('timeout', timeoutMessage(this.#deps.waitMs));
  }

  /** Clears every deadline (the queue stops: the requests still waiting are cut with the server). */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  /**
   * Settles the waiters of `job` from its row `row` when the job ended (outcomes.ts `endedAnswer`; one failed at a
   * sync deadline answers `504 timeout`, a row gone `404 message not found`). @returns false while it has not ended.
   */
  #settleEnded(job: JobKey, row: SendJob | undefined): boolean {
    const { waiters, waitMs } = this.#deps;
    const answer = row === undefined ? { error: errors.notFound('message not found') } : endedAnswer(row);
    if (answer === undefined) return false;
    // Answered on behalf of the relay that ended it: an outcome owed to requests that left meanwhile stays that
    // relay's to record (waiters.ts `answer`).
    if ('sent' in answer) waiters.answer(job, answer.sent);
    else {
      const timedOut = row?.status === 'failed' && row.lastError === timeoutMessage(waitMs);
      waiters.answer(job, undefined, timedOut ? this.timedOut() : answer.error);
    }
    return true;
  }

  /** Fails `job` if still unclaimed and settles its waiters. @returns true to try again later (the store failed). */
  async #expire(job: JobKey): Promise<boolean> {
    const { db, clock, logger, waiters, waitMs, recordWith, report } = this.#deps;
    const message = timeoutMessage(waitMs);
    try {
      const at = clock();
      const outcome = messageReport(job.id, 'failed', at, message);
      // Its `MessageStatus failed` event is written with the failure when no request waits to carry it.
      const failed = await recordWith(job.instanceId, async (trx) => {
        const changed = await failPendingSendJob(trx, job.instanceId, job.id, at, message);
        return { result: changed, reports: changed && !waiters.carryOutcome(job, outcome) ? [outcome] : [] };
      });
      if (failed) {
        // A request that left while the failure committed: the event left out for it is recorded now.
        await settleOwed(waiters, report, job, undefined, new DomainError('timeout', message));
        return false;
      }
      // Claimed by a relay, or ended already, perhaps by another node's deadline.
      const row = await findSendJob(db, job.instanceId, job.id);
      if (row?.status === 'failed' && row.attempts === 0 && row.lastError === message) {
        // Failed at a deadline already: an earlier try of this one whose answer was lost. A request that left
        // meanwhile gets the event that try left out for it.
        await settleOwed(waiters, report, job, undefined, this.timedOut());
        return false;
      }
      if (this.#settleEnded(job, row)) return false;
      if (row?.lockedBy === this.#deps.nodeId) {
        // This node's relay holds it: its answer settles the waiters.
        logger.debug(
          { instanceId: job.instanceId, id: job.id },
          'a synchronous send waits past its deadline for its relay',
        );
        return false;
      }
      // Another node's relay holds it (the instance moved), or one handed it back: its outcome reaches this request
      // only through the row.
      logger.debug(
        { instanceId: job.instanceId, id: job.id, lockedBy: row?.lockedBy ?? null },
        "a synchronous send past its deadline follows another node's relay",
      );
      this.follow(job, clock());
      return false;
    } catch (error) {
      // The job may still go out: its requests keep waiting, and the deadline is tried again, also when none waits.
      logger.warn({ err: error, instanceId: job.instanceId, id: job.id }, 'failing an expired send failed');
      return true;
    }
  }
}

/** The error text of a synchronous send failed unsent after waiting `waitMs` ms for its relay. */
function timeoutMessage(waitMs: number): string {
  return `the message could not be relayed within ${Math.ceil(waitMs / 1000)} s and was not sent`;
}

/** The error text of a synchronous send `id` whose relay, not this request's, had not ended when its wait did. */
function unknownOutcome(id: string): string {
  return `the message's relay has not ended and its outcome is not known; GET /v1/messages/${id} shows it`;
}
