import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { DomainError, type DomainErrorCode } from '../domain/errors.ts';
import { extended } from '../domain/objects.ts';
import type { Database } from '../store/schema.ts';
import { holdBackSendJob, type SendJobHold } from '../store/send-job-claims.ts';
import { SLOT_WAIT } from '../store/send-job-slots.ts';
import { findSendJob, type SendJob } from '../store/send-jobs.ts';
import { finishJob } from './finish.ts';
import { loggedOutBeforeRelay } from './logout.ts';
import { endedAnswer } from './outcomes.ts';
import type { PaceKeeper } from './pause.ts';
import { messageReport, type ReportedWrite, type SendStatusReport } from './queue-deps.ts';
import { type SendWaiters, settleOwed } from './waiters.ts';

/** Longest wait between two tries of a job held back by a transient failure, ms. */
export const MAX_RETRY_DELAY_MS = 60_000;

/**
 * How a claimed job waits once held back ({@link RelayFailures.holdBack}): until when (epoch ms), in its place in the
 * instance's acceptance order, moved behind or waiting for a new-chat slot, and whether its attempt is given back
 * (src/store/send-job-claims.ts `SendJobHold` says what each means); `until` is a due time, on the store's clock
 * (docs/decisions/0112-send-due-times-on-the-store-clock.md); `wakeAt` (epoch ms, on the business clock), when the
 * queue is to look again if not `until` (a send waiting for a slot: when the window frees the next one).
 */
export type HoldBack = Pick<SendJobHold, 'until' | 'waits' | 'unrelayed'> & { wakeAt?: number };

/**
 * Whether a relay error is worth another try of an async job (docs/decisions/0009-sends-as-jobs.md): a plain error
 * (`code` undefined: the session went away, the store failed), or the session not connected, not logged in or not
 * ready, the platform unreachable, a timeout.
 */
export function isTransient(code: DomainErrorCode | undefined): boolean {
  return (
    code === undefined ||
    code === 'not_connected' ||
    code === 'not_logged_in' ||
    code === 'platform_unreachable' ||
    code === 'timeout' ||
    code === 'not_ready'
  );
}

/** What {@link RelayFailures} needs from the send queue (queue.ts `SendQueue`). */
export interface RelayFailuresDeps {
  /** Runs a store call, waiting out a store that cannot be reached until the queue stops (relay.ts `JobRelayDeps`). */
  untilStored: <T>(work: () => Promise<T>) => Promise<T>;
  db: Kysely<Database>;
  /** The business clock: failures' and pauses' times (queue-deps.ts `SendQueueDeps.clock`). */
  clock: Clock;
  /**
   * The clock a retry's due time is set on, the store's (queue-deps.ts `dueClockOf`;
   * docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  dueClock: Clock;
  /** This node's id: the `locked_by` of the jobs it finishes. */
  nodeId: string;
  logger: FastifyBaseLogger;
  /** The requests waiting for a job's outcome. */
  waiters: SendWaiters;
  /** The instances' pauses and reach-out timelocks. */
  pace: PaceKeeper;
  /**
   * Records a status report (queue.ts `SendQueue.report`: waits out an unreachable store until it answers or the
   * queue stops; any failure is logged, never thrown).
   */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
  /**
   * Runs `write` in a transaction that records its `MessageStatus` reports with it (queue-deps.ts
   * `SendQueueDeps.recordWith`). @throws the write's or the store's error.
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
  /** Wakes the instance's queue in `delayMs` ms (keeps an earlier wake already set). */
  schedule(instanceId: string, delayMs: number): void;
  /**
   * Settles the waiters of a job another holder took over, accepted at `since` (epoch ms), from its row once that
   * holder ended it (sync-deadline.ts `SyncDeadlines.follow`).
   */
  follow(job: SendJob, since: number): void;
  /**
   * The relay of claimed job `job` lets it go unwritten: the job was no longer this node's `sending` job (another
   * holder took it over), so it may stay `sending` (runners.ts `RelayHolds.leave`).
   */
  left(job: SendJob): void;
}

/**
 * What becomes of a claimed send job that cannot be relayed now (docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0013-pacing.md): put back until later, failed, or the cause of a pause of the instance's queue.
 */
export class RelayFailures {
  readonly #deps: RelayFailuresDeps;

  /** Cheap, no I/O. */
  constructor(deps: RelayFailuresDeps) {
    this.#deps = deps;
  }

  /**
   * A relay failed: a platform restriction pauses the queue; a sync job fails with the error (its request answers
   * it); an async job is tried again later for a transient failure (the session went away, the platform could not
   * be reached, the store failed) until `maxAttempts`, and fails for anything else.
   * @returns true when the store showed the job `sent` already (the message went out before the engine failed:
   *   {@link #settleSent}), so the caller paces the queue as after a send; false otherwise.
   */
  async failed(job: SendJob, error: unknown): Promise<boolean> {
    const now = this.#deps.clock();
    // The job's retry is due on the store's clock, the pause it causes ends on the business clock (both after the
    // same wait): docs/decisions/0112-send-due-times-on-the-store-clock.md.
    const due = this.#deps.dueClock();
    const code = error instanceof DomainError ? error.code : undefined;
    if (code === 'rate_limited' && error instanceof DomainError) {
      const waitMs = error.retryAfter ? error.retryAfter * 1000 : 60_000;
      const until = now + waitMs;
      // The job is put back (or failed, for a sync send) before the pause is written and reported: whoever sees
      // the pause sees the job already pending until its end. A job no longer this node's leaves the pause to its
      // holder (docs/decisions/0008-leases-and-fencing.md). The timelock holds only sends that open a chat: this one
      // moves behind, and the instance's sends to known chats go on. The rate-overlimit pauses every queued send:
      // this one keeps its place, first when the pause ends (docs/decisions/0013-pacing.md).
      const timelock = error.restriction === 'reach-out-timelock';
      const waits = timelock ? 'moved' : 'in-place';
      if (!(await this.holdBack(job, error, { until: due + waitMs, waits, unrelayed: false }))) return false;
      if (timelock) {
        // Only sends that open a chat wait: existing chats still work (docs/decisions/0013-pacing.md).
        await this.#deps.untilStored(() =>
          this.#deps.pace.lockNewChats(job.instanceId, { until, reason: error.message }, now),
        );
        // Its end is reported by the drain's first pass after it: wake the queue then, whatever path met it.
        this.#deps.schedule(job.instanceId, Math.max(0, until - this.#deps.clock()));
      } else {
        await this.#deps.untilStored(() =>
          this.#deps.pace.startPause(job.instanceId, { reason: error.message, until }),
        );
      }
      return false;
    }
    const transient = isTransient(code);
    if (job.mode === 'async' && transient && job.attempts < job.maxAttempts) {
      const delay = Math.min(MAX_RETRY_DELAY_MS, 1_000 * 2 ** Math.max(0, job.attempts - 1));
      // Tried again in its place: the instance's later jobs wait behind it (docs/decisions/0009-sends-as-jobs.md).
      await this.holdBack(job, error, { until: due + delay, waits: 'in-place', unrelayed: false });
      return false;
    }
    return (await this.#fail(job, error, now)) === 'sent';
  }

  /**
   * A relay whose outcome is unknown (the engine's `UnconfirmedRelayError`: no ack, its connection ended), whose job
   * stays `sending` for the next login's hand-back to relay again under its id (relay.ts; nothing is written now):
   * logged, and the requests waiting for the job follow its row from its acceptance (sync-deadline.ts
   * `SyncDeadlines.follow`). They get the next relay's outcome (that relay answers them when it runs here), or, when
   * the job has not ended within the sync wait of its acceptance (the connection stays away), `504` with its
   * outcome unknown, as a relay taken over by another node answers (docs/decisions/0009-sends-as-jobs.md); its
   * `MessageStatus` event then tells the outcome.
   */
  unconfirmed(job: SendJob, error: Error): void {
    this.#deps.logger.warn(
      { err: error, instanceId: job.instanceId, id: job.id, attempts: job.attempts },
      'the platform did not confirm a relay: the send is relayed again under its id after the next login',
    );
    this.#deps.follow(job, job.createdAt);
  }

  /**
   * The due time, on the store's clock (epoch ms), of a job held back until `until` on the business clock (a
   * reach-out timelock's end, a new-chat slot's): `until` moved by how far the store's clock is from the business
   * clock, so the job waits as long on either (`until` itself when both are one clock: a queue without a store clock)
   * (docs/decisions/0112-send-due-times-on-the-store-clock.md). Reads two in-memory clocks, no statement.
   */
  dueAfter(until: number): number {
    return until + (this.#deps.dueClock() - this.#deps.clock());
  }

  /**
   * Puts a claimed job back to `pending` until `hold.until` (epoch ms, store's clock), in its place, moved behind or waiting for a
   * new-chat slot, and with its attempt given back or not, as `hold` says (a sync job fails instead: its request
   * answers `error`); the queue wakes at `hold.wakeAt`, else at `hold.until`. A job a logout found being relayed is
   * canceled instead, and its `MessageStatus canceled` reported (docs/decisions/0074-logout-cancels-pending-sends.md).
   * @returns true when the job is `pending` again; false when it was canceled, or no longer this node's (nothing
   *   written: its holder decides).
   */
  async holdBack(job: SendJob, error: unknown, hold: HoldBack): Promise<boolean> {
    if (job.mode === 'sync') return (await this.#fail(job, error, this.#deps.clock())) === 'mine';
    const message = error instanceof Error ? error.message : String(error);
    const at = this.#deps.clock();
    const held = await this.#holdBackRow(job, extended(hold, { at, error: message }));
    if (held === 'canceled') {
      this.#deps.waiters.settle(job, undefined, loggedOutBeforeRelay());
      return false;
    }
    if (held === 'pending') {
      const delay =
        hold.wakeAt !== undefined ? hold.wakeAt - this.#deps.clock() : hold.until - this.#deps.dueClock();
      this.#deps.schedule(job.instanceId, Math.max(0, delay));
    }
    if (held === undefined) this.#deps.left(job);
    return held === 'pending';
  }

  /**
   * Holds claimed job `job` back (src/store/send-job-claims.ts `holdBackSendJob`), waiting out an unreachable store;
   * a job it cancels has its `MessageStatus canceled` recorded in the same transaction
   * (docs/decisions/0076-status-with-its-write.md). A try whose answer was lost is found written, its event with it:
   * the job unlocked with this hold-back's error, `pending` until its end (its `not_before`, or its `run_at` when it
   * moved), or `canceled` with the logout's mark at this
   * write's time (a job the logout itself canceled, pending, has no mark: the logout reported it; one another node's
   * hand-back canceled was written at that node's time).
   * @returns the status written, or undefined when the job was no longer this node's.
   */
  async #holdBackRow(job: SendJob, outcome: SendJobHold): Promise<'pending' | 'canceled' | undefined> {
    const { db, nodeId, untilStored, recordWith } = this.#deps;
    return untilStored(async () => {
      const written = await recordWith(job.instanceId, async (trx) => {
        const status = await holdBackSendJob(trx, job.instanceId, job.id, nodeId, outcome);
        return {
          result: status,
          reports: status === 'canceled' ? [messageReport(job.id, 'canceled', outcome.at)] : [],
        };
      });
      if (written !== undefined) return written;
      const row = await findSendJob(db, job.instanceId, job.id);
      if (row === undefined || row.lockedBy !== null || row.lastError !== outcome.error) return undefined;
      const waited =
        outcome.waits === 'in-place'
          ? row.notBefore
          : outcome.waits === 'moved'
            ? row.runAt
            : row.runAt - SLOT_WAIT;
      if (row.status === 'pending' && waited === outcome.until) return 'pending';
      // Canceled by this write: the logout's mark, and this write's time (another node's hand-back may have canceled
      // it with the same error; it reported the event then).
      return row.status === 'canceled' && row.loggedOutAt !== null && row.updatedAt === outcome.at
        ? 'canceled'
        : undefined;
    });
  }

  /**
   * Marks claimed job `job` failed with `error` at `at` (epoch ms), reports it when no request waits for it, and
   * answers its requests with `error`. When the job is no longer this node's (another holder took it over after a
   * lost lease, docs/decisions/0008-leases-and-fencing.md) no failure is written or reported here: a job the store
   * shows `sent` is settled as sent ({@link #settleSent}), and otherwise its requests wait for the new holder's
   * outcome (`follow`): that holder may still send the message, and a request answered with this node's error
   * would let its client send it a second time.
   * @returns `mine` when this node's failure holds, `sent` when the store showed the job sent, `other` when its
   *   requests follow another holder.
   */
  async #fail(job: SendJob, error: unknown, at: number): Promise<'mine' | 'sent' | 'other'> {
    const message = error instanceof Error ? error.message : String(error);
    // An outcome no request waits for is an event, written with the failure.
    // Written with its event when no request waits for it (asked at each try); a try whose answer was lost finds
    // the job unlocked and `failed` with this error.
    const mine = await finishJob(
      this.#deps,
      job,
      { status: 'failed', at, error: message },
      messageReport(job.id, 'failed', at, message),
      (row) => row.lockedBy === null && row.status === 'failed' && row.lastError === message,
    );
    if (!mine) return this.settleTaken(job);
    // The failure's event was left out for a request that has left since (finish.ts): recorded now.
    await settleOwed(this.#deps.waiters, this.#deps.report, job, undefined, error);
    return 'mine';
  }

  /**
   * For a relay whose outcome could not be written because the job was no longer this node's to finish: a job the
   * store shows `sent` is settled as sent ({@link #settleSent}); otherwise its requests wait for the new holder's
   * outcome (`follow`), which may still send the message.
   * @returns `sent` or `other`, as {@link #fail} does.
   */
  async settleTaken(job: SendJob): Promise<'sent' | 'other'> {
    if (await this.#settleSent(job)) return 'sent';
    this.#deps.left(job);
    this.#deps.follow(job, job.createdAt);
    return 'other';
  }

  /**
   * For a failed relay whose job the store shows `sent` already: the engine failed after the message went out and
   * the transaction recording it marked the job sent (queue.ts `derive`), or another holder sent it. Its requests
   * are answered with that outcome, as the relay's success would answer them; when they all left before, and the
   * `MessageStatus` event was left out for them in this node's transaction (the row's `sent_at` is the time it
   * noted, waiters.ts `carry`), the event is recorded now, so the outcome is not lost with the failed relay.
   * @returns false when the job has not ended `sent`, or its row could not be read (its requests then follow the
   *   row).
   */
  async #settleSent(job: SendJob): Promise<boolean> {
    const { untilStored, db, waiters, report } = this.#deps;
    const row = await untilStored(() => findSendJob(db, job.instanceId, job.id)).catch(() => undefined);
    const answer = row === undefined ? undefined : endedAnswer(row);
    if (answer === undefined || !('sent' in answer)) return false;
    const owed = waiters.settle(job, answer.sent);
    if (owed?.kind === 'message' && owed.at === row?.sentAt) await report(job.instanceId, owed);
    return true;
  }
}
