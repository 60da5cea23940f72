import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { SentMessage } from '../domain/messages.ts';
import type { PacingSettings } from '../domain/sends.ts';
import { type EngineSession, UnconfirmedRelayError, UnrecordedSendError } from '../engines/engine.ts';
import type { Database } from '../store/schema.ts';
import { markSendJobNewChat, type SendJob } from '../store/send-jobs.ts';
import type { RelayFailures } from './failures.ts';
import { finishJob } from './finish.ts';
import type { PaceKeeper } from './pause.ts';
import { decodeSendPayload } from './payload.ts';
import { messageReport, type ReportedWrite, type SendStatusReport } from './queue-deps.ts';
import { askHandBack, awaitsLogin, type Runner, type Runners } from './runners.ts';
import type { SentMarks } from './sent-marks.ts';
import { type SendWaiters, settleOwed } from './waiters.ts';

/** What a {@link JobRelay} needs from the send queue (queue.ts `SendQueue`). */
export interface JobRelayDeps {
  /**
   * Runs one of the relay's store calls, waiting out a store that cannot be reached (until the queue stops, when it
   * throws the store's error): the job stays held meanwhile, so no hand-back gives it to a second relay.
   */
  untilStored: <T>(work: () => Promise<T>) => Promise<T>;
  db: Kysely<Database>;
  clock: Clock;
  /** This node's id: the `locked_by` of the jobs it finishes. */
  nodeId: string;
  /** Random source in [0, 1) for the pace's jitter. */
  random: () => number;
  /** Each instance's queue state: the jobs held for a relay, the pace's next allowed time. */
  runners: Runners;
  /** The instances' pace, new-chat limits and pauses. */
  pace: PaceKeeper;
  /** What becomes of a relay that failed or must wait. */
  failures: RelayFailures;
  /** The jobs marked sent in the recorder's transactions. */
  sentMarks: SentMarks;
  /** The requests waiting for a job's outcome. */
  waiters: SendWaiters;
  /**
   * Records a `MessageStatus` event (queue.ts `SendQueue.report`: waits out an unreachable store until it answers or
   * the queue stops; any failure is logged, never thrown).
   */
  report: (instanceId: string, report: SendStatusReport) => Promise<void>;
  /**
   * Runs `write` in a transaction that records its `MessageStatus` reports with it (queue-deps.ts
   * `SendQueueDeps.recordWith`). @throws the write's or the store's error.
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
}

/**
 * The relay of one claimed send job and its outcome (docs/decisions/0009-sends-as-jobs.md, 0013-pacing.md): the
 * daily new-chat limit first (held back until the limit allows), then the engine's send under the job's own id,
 * the pace's next allowed time, the job finished `sent` (unless the recorder's transaction marked it already), and
 * the waiting request answered; a failure goes to {@link RelayFailures}, except an engine's
 * {@link UnrecordedSendError} (the message went out, its recording failed), which ends the job `sent` too, and its
 * {@link UnconfirmedRelayError} (no ack: the outcome is unknown), which leaves the job `sending` for the next login's
 * hand-back to relay again under its id. The job
 * is held by this process while its relay runs, so a login's hand-back of `sending` jobs
 * (store/send-job-claims.ts `reclaimSendingJobs`) leaves it; a relay that then lets it go unwritten (another holder had
 * taken it over) asks for another hand-back as it ends (runners.ts `Runners.release`).
 */
export class JobRelay {
  readonly #deps: JobRelayDeps;

  /** Cheap, no I/O. */
  constructor(deps: JobRelayDeps) {
    this.#deps = deps;
  }

  /**
   * Relays `job` (claimed by this node) through `session` under `pacing` and stores its outcome, waiting out a store
   * that cannot be reached (`untilStored`) so the outcome is stored before the waiting request hears it. `released`:
   * the job waited for a new-chat slot and this process released it (new-chat-slots.ts); held for a slot again, it
   * keeps its place among the sends waiting for one.
   * Never throws for the job's own failure (it is held back or failed); throws the store's error when the store
   * fails otherwise, or is still away when the queue stops (the job stays `sending` for the instance's next holder).
   */
  async relay(session: EngineSession, job: SendJob, pacing: PacingSettings, released = false): Promise<void> {
    const runner = this.#deps.runners.get(job.instanceId);
    runner.relaying.hold(job.id);
    try {
      await this.#relayHeld(session, job, pacing, runner, released);
    } finally {
      this.#deps.runners.release(job.instanceId, runner, job.id);
    }
  }

  async #relayHeld(
    session: EngineSession,
    job: SendJob,
    pacing: PacingSettings,
    runner: Runner,
    released: boolean,
  ): Promise<void> {
    // The logins counted when the relay began: one committed while it ran does not leave the queue waiting.
    const logins = runner.logins;
    const { db, clock, pace, failures, untilStored } = this.#deps;
    const check = await untilStored(() => pace.newChatCheck(job, pacing));
    if (check.hold) {
      // Never relayed: its attempt is given back, so a send waiting days for a slot keeps its tries for its relays;
      // it moves behind, and sends to known chats go on (docs/decisions/0013-pacing.md).
      const { error, until, forSlot } = check.hold;
      if (!forSlot) {
        // Moved behind until the timelock's end (business clock), its due time on the store's clock.
        await failures.holdBack(job, error, {
          until: failures.dueAfter(until),
          waits: 'moved',
          unrelayed: true,
        });
        return;
      }
      // Past the new-chats cap: it waits among the sends waiting for a slot, which the queue releases as the window
      // frees slots (new-chat-slots.ts). First held, it takes its place behind them, at the time the next slot frees;
      // one held again (released, then a send before it took the slot) keeps the place it had.
      runner.slotCheckAt = Math.min(runner.slotCheckAt, until);
      await failures.holdBack(job, error, {
        until: released ? job.runAt : failures.dueAfter(until),
        waits: 'for-slot',
        unrelayed: true,
        wakeAt: until,
      });
      return;
    }
    const { opensChat } = check;
    if (opensChat) await untilStored(() => markSendJobNewChat(db, job.instanceId, job.id));
    let sent: SentMessage;
    try {
      sent = await session.send(decodeSendPayload(job.payload, job.id));
    } catch (error) {
      const failedAt = clock();
      if (error instanceof UnrecordedSendError) {
        this.paced(runner, pacing, failedAt);
        await this.#unrecorded(job, error.sent, failedAt, opensChat);
        return;
      }
      if (error instanceof UnconfirmedRelayError) {
        // It may have gone out: the pace counts it as a send.
        this.paced(runner, pacing, failedAt);
        this.#unconfirmed(job, error, runner, logins);
        return;
      }
      // The engine may have failed after its message went out: recorded here as its own `message` event, or shown
      // `sent` in the store. The pace counts such a send from the engine's answer, as it counts one that succeeded.
      const recorded = this.#deps.sentMarks.takeRecorded(job);
      const sentAfterAll = await failures.failed(job, error);
      if (recorded || sentAfterAll) this.paced(runner, pacing, failedAt);
      return;
    }
    const at = clock();
    this.paced(runner, pacing, at);
    // The job was marked sent in the transaction that recorded the message (derive), with its MessageStatus event
    // unless a request waited to carry it; a relay whose engine recorded no message of its own is finished here,
    // with that event in the same transaction.
    // A finish that finds the job no longer this node's (another holder took it over) leaves it to that holder.
    if (!this.#deps.sentMarks.takeRecorded(job) && !(await this.#finishSent(job, at, opensChat)))
      runner.relaying.leave(job.id);
    // The outcome's event was left out for a waiting request that has gone since (waiters.ts `carry`): recorded now.
    await settleOwed(this.#deps.waiters, this.#deps.report, job, sent);
  }

  /**
   * The engine's message went out at `at` (epoch ms) but could not be recorded ({@link UnrecordedSendError}): the job
   * ends `sent` as after a success, never `failed` (a failed job tells its client to send it a second time). When
   * this node's finish holds, its requests are answered with `sent`, or, none waiting, the `sent` event is recorded
   * at `at` (the transaction that failed derived none). When it does not (the recording committed after all and
   * only its answer was lost, or another holder took the job over), the job's row decides, as for a failed relay
   * (failures.ts `settleTaken`), so no second `sent` event is recorded.
   */
  async #unrecorded(job: SendJob, sent: SentMessage, at: number, opensChat: boolean): Promise<void> {
    const { sentMarks, waiters, failures } = this.#deps;
    sentMarks.takeRecorded(job);
    if (!(await this.#finishSent(job, at, opensChat))) {
      await failures.settleTaken(job);
      return;
    }
    // Its event was left out for a request that has left since (finish.ts): recorded now.
    await settleOwed(waiters, this.#deps.report, job, sent);
  }

  /**
   * The platform never acknowledged the relay of `job`, begun when the instance's queue had counted `logins` logins,
   * and the engine ended the connection (`UnconfirmedRelayError`): the message may or may not have reached the
   * platform, so the job is neither `sent` (it may be lost) nor `failed` (its client would send it a second time). It
   * is left `sending`, unwritten: the next login's hand-back makes it `pending` and the queue relays it again first,
   * under its id, which the platform's clients show once (docs/decisions/0009-sends-as-jobs.md); until that login the
   * queue relays nothing (runners.ts `awaitsLogin`). A login committed while this relay ran has already handed back
   * the jobs it held: the queue hands back again at once. The requests waiting for the job follow it
   * (failures.ts `RelayFailures.unconfirmed`).
   */
  #unconfirmed(job: SendJob, error: UnconfirmedRelayError, runner: Runner, logins: number): void {
    runner.unconfirmedAt = logins;
    askHandBack(runner);
    runner.idle = false;
    if (!awaitsLogin(runner)) this.#deps.runners.schedule(job.instanceId, 0);
    this.#deps.failures.unconfirmed(job, error);
  }

  /**
   * Ends claimed job `job` `sent` at `at` (epoch ms; src/store/send-job-claims.ts `finishSendJob`), waiting out an
   * unreachable store, with its `MessageStatus sent` event in the same transaction when no request waits to carry
   * the outcome (docs/decisions/0076-status-with-its-write.md). A try whose answer was lost finds the job no longer
   * `sending` and writes nothing more: its event committed with it.
   * @returns true when this write ended the job; false when it was no longer this node's `sending` job.
   */
  #finishSent(job: SendJob, at: number, opensChat: boolean): Promise<boolean> {
    return finishJob(
      this.#deps,
      job,
      { status: 'sent', at, newChat: opensChat },
      messageReport(job.id, 'sent', at),
    );
  }

  /**
   * Sets the instance's next allowed relay after one sent at `at` (epoch ms): `at` plus the pace's interval and a
   * new draw of its jitter (0 when both are 0), and remembers `at` as the last relay, from which a pace set later
   * counts (docs/decisions/0013-pacing.md).
   */
  paced(runner: Runner, pacing: PacingSettings, at: number): void {
    const interval = pacing.minIntervalMs + Math.round(this.#deps.random() * pacing.jitterMs);
    runner.lastRelayAt = at;
    runner.nextAllowedAt = interval > 0 ? at + interval : 0;
  }
}
