import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { errors } from '../domain/errors.ts';
import type { EngineEvent } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';
import { takeHeldReceipts } from '../store/held-receipts.ts';
import type { Database } from '../store/schema.ts';
import {
  claimNextSendJob,
  firstPendingJob,
  RELAY_ATTEMPTS_INTERRUPTED,
  type Reclaimed,
  reclaimSendingJobs,
} from '../store/send-job-claims.ts';
import type { StoredPacing } from '../store/send-pacing.ts';
import { releaseFreedSlots } from './new-chat-slots.ts';
import type { PaceKeeper } from './pause.ts';
import { messageReport, type ReportedWrite, type SendStatusReport } from './queue-deps.ts';
import type { JobRelay } from './relay.ts';
import { askHandBack, awaitsLogin, claimedReleased, type Runner, type Runners } from './runners.ts';
import { type SendWaiters, settleOwed } from './waiters.ts';

/** What one pass of an instance's drain uses (the send queue's parts, queue.ts `SendQueue`). */
export interface DrainContext {
  db: Kysely<Database>;
  /** The business clock: the pace, pauses, timelocks and the new-chats window (queue-deps.ts `SendQueueDeps.clock`). */
  clock: Clock;
  /**
   * The clock jobs' due times are judged on, the store's (queue-deps.ts `dueClockOf`;
   * docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  dueClock: Clock;
  /** This node's id: the `locked_by` of the jobs it claims. */
  nodeId: string;
  logger: FastifyBaseLogger;
  /** The engine session of an instance held by this process, if any. */
  session(instanceId: string): EngineSession | undefined;
  /** True once the queue is stopping: nothing more is claimed. */
  stopped(): boolean;
  /** The instance's pace and pause. */
  pacing(instanceId: string): Promise<StoredPacing>;
  pace: PaceKeeper;
  runners: Runners;
  jobs: JobRelay;
  /**
   * Runs `write` in a transaction that records its `MessageStatus` reports with it (queue-deps.ts
   * `SendQueueDeps.recordWith`). @throws the write's or the store's error.
   */
  recordWith<T>(instanceId: string, write: ReportedWrite<T>): Promise<T>;
  /** The requests waiting for a job's outcome. */
  waiters: SendWaiters;
  /**
   * Records a status report (queue.ts `SendQueue.report`: waits out an unreachable store until it answers or the
   * queue stops; any failure is logged, never thrown).
   */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
}

/** Resolves after the I/O callbacks already due (setImmediate runs after the event loop's poll phase). */
function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Runs the instance's due jobs ({@link drainOnce}) until none is due or something must be waited for, once more when
 * something woke the queue during a pass (`Runner.again`), with `Runner.draining` set meanwhile. A pass that failed on
 * the store's error is logged and tried again in 1 s, handing back first. Never throws.
 */
export async function drain(context: DrainContext, instanceId: string, runner: Runner): Promise<void> {
  runner.draining = true;
  try {
    do {
      runner.again = false;
      await drainOnce(context, instanceId, runner);
    } while (runner.again && !context.stopped());
  } catch (error) {
    context.logger.warn({ err: error, instanceId }, 'the send queue stopped on an error; retrying in 1 s');
    askHandBack(runner);
    context.runners.schedule(instanceId, 1_000);
  } finally {
    runner.draining = false;
  }
}

/**
 * One pass of an instance's drain (docs/decisions/0009-sends-as-jobs.md, 0013-pacing.md): hands back the `sending`
 * jobs no relay of this process holds when a login committed since the last hand-back ({@link handBack}), then claims
 * and relays the instance's due jobs one at a time in acceptance order, one a turn of the event loop, until none is
 * due, the first waits for its retry, the session is away, the queue stops, or the pace or a pause says to wait (the
 * runner's wake is then set for that time). Before a claim it releases the sends waiting for a new-chat slot to the
 * chats the window has slots for, when one may have freed (new-chat-slots.ts). It claims nothing while a synchronous send
 * is relayed at once (`Runner.immediate`: its end wakes the queue). After a relay whose outcome is unknown it hands
 * back and claims nothing until the next login (runners.ts `awaitsLogin`).
 * @throws the store's error (the queue tries again in 1 s, handing back first).
 */
export async function drainOnce(context: DrainContext, instanceId: string, runner: Runner): Promise<void> {
  const { db, clock, dueClock, nodeId, pace, runners, jobs } = context;
  for (let first = true; ; first = false) {
    // One job per turn of the event loop: the requests that arrived meanwhile are read first, so a burst of
    // queued sends is accepted at full speed and relayed in the gaps, never starved (each turn relays one).
    if (!first) await yieldToIo();
    if (context.stopped()) return;
    // Only the holder of the instance's session hands back (and claims): a queue woken on a node without it (a send
    // accepted here while another node took the instance) would hand back the jobs that node is relaying, for a
    // second relay. The hand-back stays asked for until this process holds the session.
    if (context.session(instanceId) === undefined) return;
    // Before the first claim after a login, whenever it committed.
    if (!runner.reclaimed) {
      const asked = runner.handBacksAsked;
      await handBack(context, instanceId, runner);
      // Another hand-back was asked for while this one ran (a login, a relay left unconfirmed): it runs first.
      if (runner.handBacksAsked !== asked) continue;
      runner.reclaimed = true;
    }
    // A relay's outcome is unknown (its connection ended): nothing goes out before the next login relays it again.
    if (awaitsLogin(runner)) return;
    const session = context.session(instanceId);
    const state = session?.state();
    if (!session || !state?.loggedIn || !state.connected) return;
    const now = clock();
    const { pacing, pause, newChatLock } = await context.pacing(instanceId);
    // Jobs are due on the store's clock, read after the pace as the claim is (an in-memory estimate, no statement):
    // docs/decisions/0112-send-due-times-on-the-store-clock.md.
    const due = dueClock();
    // A reach-out timelock ends with its `resumed` on time, whether or not a send waits for it
    // (docs/decisions/0013-pacing.md): cleared at the first pass after its end, which the runner's wake is set for.
    if (newChatLock !== null) {
      if (newChatLock.until <= now) await pace.newChatLock(instanceId);
      else runners.schedule(instanceId, newChatLock.until - now);
    }
    if (pause !== null && pause.until > now) {
      // Queued sends wait for the pause's end; a synchronous request waiting here is relayed and gets the
      // platform's own answer, once the pace allows it: the pace holds during a pause as at any other time.
      if (runner.nextAllowedAt > now)
        return runners.schedule(instanceId, Math.min(runner.nextAllowedAt, pause.until) - now);
      const sync = await claimNextSendJob(db, instanceId, nodeId, due, { mode: 'sync' });
      if (sync) {
        runner.idle = false;
        await jobs.relay(session, sync, pacing);
        continue;
      }
      return runners.schedule(instanceId, pause.until - now);
    }
    if (pause !== null) await pace.resume(instanceId);
    if (runner.nextAllowedAt > now) return runners.schedule(instanceId, runner.nextAllowedAt - now);
    // A synchronous send relayed at once is under way: the jobs due now became due or were accepted after it, and go
    // once it ended (its end wakes the queue), never beside it (docs/decisions/0013-pacing.md).
    if (runner.immediate > 0) {
      runner.deferred = true;
      return;
    }
    // The sends waiting for a new-chat slot are released as the window frees slots, by user: as many users as slots
    // it freed, in their order, each with all its waiting sends, by number and by LID (new-chat-slots.ts): looked at
    // when a slot may have freed, not at every pass.
    if (runner.slotCheckAt <= now)
      await releaseFreedSlots(db, runners, instanceId, runner, pacing, newChatLock?.until, now);
    const job = await claimNextSendJob(db, instanceId, nodeId, due);
    if (!job) {
      // Nothing due, or the first job waits for its retry in its place and the others behind it: the queue wakes when
      // the first can go. Only with nothing due is the queue idle; a job waiting for its retry keeps a synchronous
      // send from relaying at once past it (sync-relay.ts), so the instance's sends keep acceptance order.
      const first = await firstPendingJob(db, instanceId);
      if (first !== undefined)
        runners.schedule(instanceId, Math.max(0, Math.max(first.runAt, first.notBefore) - due));
      // The next look for freed new-chat slots, which an earlier wake set meanwhile may have taken the place of.
      if (runner.slotCheckAt !== Number.POSITIVE_INFINITY)
        runners.schedule(instanceId, Math.max(0, runner.slotCheckAt - now));
      if (!runner.again) {
        runner.idle = first === undefined || first.runAt > due;
        runner.idleUntil = first === undefined ? Number.POSITIVE_INFINITY : first.runAt;
        runner.queued = 0;
      }
      return;
    }
    // Not idle from the claim on, in the step that takes the job off `queued` (Runner.idle).
    runner.queued = Math.max(0, runner.queued - 1);
    runner.idle = false;
    // A released send is claimed: its user's slot is no longer set aside, and the window is looked at again after its
    // relay (it may have left the slot unused: a chat it no longer opens, a failure, a timelock).
    const released = claimedReleased(runner, job.id);
    await jobs.relay(session, job, pacing, released);
  }
}

/**
 * Hands back the instance's `sending` jobs that no relay of this process holds (src/store/send-job-claims.ts
 * `reclaimSendingJobs`), at the clock's time, in one transaction with the `MessageStatus` events of the jobs it ends
 * instead (docs/decisions/0076-status-with-its-write.md): `sent`, at the time their message row was written, for those
 * whose message is recorded (their relay went out and was recorded before its process stopped: never relayed again,
 * docs/decisions/0105-recorded-sends-end-sent-at-the-hand-back.md), `canceled` for those a logout found being relayed
 * (docs/decisions/0074-logout-cancels-pending-sends.md), and `failed`, with their `last_error`, for those whose
 * attempts reached `max_attempts` (docs/decisions/0009-sends-as-jobs.md: a job whose relay was interrupted on each of
 * its attempts is not claimed again). A sent or failed job's outcome reaches its client as any relayed job's does:
 * requests of this process waiting for it (one that followed it to another holder, or a forward tried again) carry
 * it, answered with the message's id and `sent_at`, or `409 message already failed`, as from its row (outcomes.ts
 * `endedAnswer`), and its event is left out for them, then recorded if they all left before the answer (waiters.ts
 * `settleOwed`); with none waiting, the event is recorded with the write. Ended jobs are no longer `pending`, so the
 * claims after go on to the jobs accepted behind them. The receipts held for the jobs it ends
 * (src/store/held-receipts.ts: the platform had the message after all) are recorded after those events
 * (docs/decisions/0104-receipts-before-their-send.md).
 * @throws the store's error (nothing of it kept; the drain tries again in 1 s, handing back first).
 */
async function handBack(context: DrainContext, instanceId: string, runner: Runner): Promise<void> {
  const { clock, logger, waiters } = context;
  const at = clock();
  const reclaimed = await context.recordWith(
    instanceId,
    async (trx): Promise<{ result: Reclaimed; reports: SendStatusReport[]; events: EngineEvent[] }> => {
      const result = await reclaimSendingJobs(trx, instanceId, at, runner.relaying.passOver());
      // A request waiting for a job ended here carries its outcome (waiters.ts `carryOutcome`).
      const carried = (id: string, report: SendStatusReport) =>
        waiters.carryOutcome({ instanceId, id }, report) ? [] : [report];
      const sent = result.sent.flatMap((job) => carried(job.id, messageReport(job.id, 'sent', job.at)));
      const canceled = result.canceled.map((id) => messageReport(id, 'canceled', at));
      const failed = result.failed.flatMap((id) =>
        carried(id, messageReport(id, 'failed', at, RELAY_ATTEMPTS_INTERRUPTED)),
      );
      // The receipts held for the jobs it ended go out after their outcomes (held-receipts.ts).
      const ended = [...result.sent.map((job) => job.id), ...result.canceled, ...result.failed];
      const events = await takeHeldReceipts(trx, instanceId, ended);
      return { result, reports: [...sent, ...canceled, ...failed], events };
    },
  );
  if (reclaimed.handed > 0)
    logger.info({ instanceId, jobs: reclaimed.handed }, 'relaying sends whose relay was never confirmed');
  if (reclaimed.sent.length > 0)
    logger.info(
      { instanceId, jobs: reclaimed.sent.map((job) => job.id) },
      'sends ended sent without another relay: their message was recorded before their relay was interrupted',
    );
  // What a request answers for a job another relay ended sent (outcomes.ts `endedAnswer`).
  for (const job of reclaimed.sent)
    await settleOwed(waiters, context.report, { instanceId, id: job.id }, { id: job.id, timestamp: job.at });
  if (reclaimed.failed.length === 0) return;
  logger.warn(
    { instanceId, jobs: reclaimed.failed },
    'sends failed without another relay: their relay was interrupted on each of their attempts',
  );
  // What a request answers for a job another relay ended failed (outcomes.ts `endedAnswer`).
  for (const id of reclaimed.failed)
    await settleOwed(
      waiters,
      context.report,
      { instanceId, id },
      undefined,
      errors.conflict('message already failed'),
    );
}
