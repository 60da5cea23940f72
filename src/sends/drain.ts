import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { Database } from '../store/schema.ts';
import { claimNextSendJob, firstPendingJob, reclaimSendingJobs } from '../store/send-job-claims.ts';
import type { StoredPacing } from '../store/send-pacing.ts';
import type { PaceKeeper } from './pause.ts';
import { messageReport, type ReportedWrite } from './queue-deps.ts';
import type { JobRelay } from './relay.ts';
import type { Runner, Runners } from './runners.ts';

/** What one pass of an instance's drain uses (the send queue's parts, queue.ts `SendQueue`). */
export interface DrainContext {
  db: Kysely<Database>;
  clock: Clock;
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
}

/** Resolves after the I/O callbacks already due (setImmediate runs after the event loop's poll phase). */
function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * One pass of an instance's drain (docs/decisions/0009-sends-as-jobs.md, 0013-pacing.md): hands back the `sending`
 * jobs no relay of this process holds when a login committed since the last hand-back (reporting those a logout
 * found being relayed as canceled: docs/decisions/0074-logout-cancels-pending-sends.md), then claims and relays the
 * instance's due jobs one at a time in acceptance order, one a turn of the event loop, until none is due, the first
 * waits for its retry, the session is away, the queue stops, or the pace or a pause says to wait (the runner's wake
 * is then set for that time).
 * @throws the store's error (the queue tries again in 1 s, handing back first).
 */
export async function drainOnce(context: DrainContext, instanceId: string, runner: Runner): Promise<void> {
  const { db, clock, nodeId, logger, pace, runners, jobs } = context;
  for (let first = true; ; first = false) {
    // One job per turn of the event loop: the requests that arrived meanwhile are read first, so a burst of
    // queued sends is accepted at full speed and relayed in the gaps, never starved (each turn relays one).
    if (!first) await yieldToIo();
    if (context.stopped()) return;
    // Before the first claim after a login, whenever it committed.
    if (!runner.reclaimed) {
      const at = clock();
      // Jobs a logout found being relayed are canceled, not relayed from the account linked now: their events commit
      // with the hand-back (docs/decisions/0076-status-with-its-write.md).
      const { handed } = await context.recordWith(instanceId, async (trx) => {
        const reclaimed = await reclaimSendingJobs(trx, instanceId, at, runner.relaying.ids());
        return {
          result: reclaimed,
          reports: reclaimed.canceled.map((id) => messageReport(id, 'canceled', at)),
        };
      });
      if (handed > 0)
        logger.info({ instanceId, jobs: handed }, 'relaying sends whose relay was never confirmed');
      runner.reclaimed = true;
    }
    const session = context.session(instanceId);
    const state = session?.state();
    if (!session || !state?.loggedIn || !state.connected) return;
    const now = clock();
    const { pacing, pause, newChatLock } = await context.pacing(instanceId);
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
      const sync = await claimNextSendJob(db, instanceId, nodeId, now, { mode: 'sync' });
      if (sync) {
        runner.idle = false;
        await jobs.relay(session, sync, pacing);
        continue;
      }
      return runners.schedule(instanceId, pause.until - now);
    }
    if (pause !== null) await pace.resume(instanceId);
    if (runner.nextAllowedAt > now) return runners.schedule(instanceId, runner.nextAllowedAt - now);
    const job = await claimNextSendJob(db, instanceId, nodeId, now);
    if (!job) {
      // Nothing due, or the first job waits for its retry in its place and the others behind it: the queue wakes when
      // the first can go. Only with nothing due is the queue idle; a job waiting for its retry keeps a synchronous
      // send from relaying at once past it (sync-relay.ts), so the instance's sends keep acceptance order.
      const first = await firstPendingJob(db, instanceId);
      if (first !== undefined)
        runners.schedule(instanceId, Math.max(0, Math.max(first.runAt, first.notBefore) - now));
      if (!runner.again) {
        runner.idle = first === undefined || first.runAt > now;
        runner.queued = 0;
      }
      return;
    }
    // Not idle from the claim on, in the step that takes the job off `queued` (Runner.idle).
    runner.queued = Math.max(0, runner.queued - 1);
    runner.idle = false;
    await jobs.relay(session, job, pacing);
  }
}
