import { setMaxListeners } from 'node:events';
import type { SentMessage } from '../domain/messages.ts';
import type { SendPause } from '../domain/sends.ts';
import type { WaitSignal } from '../domain/withdrawal.ts';
import { untilStoreAnswers } from '../store/faults.ts';
import type { LateFailure, NewSendJob, SendJob } from '../store/send-jobs.ts';
import type { StoredPacing } from '../store/send-pacing.ts';
import type { DrainContext } from './drain.ts';
import { RelayFailures } from './failures.ts';
import { GroupInsert } from './group-insert.ts';
import { PaceKeeper } from './pause.ts';
import { dueClockOf, type ReportedWrite, type SendQueueDeps, type SendStatusReport } from './queue-deps.ts';
import { JobRelay } from './relay.ts';
import { knownNothingDue, Runners } from './runners.ts';
import type { SentMarks } from './sent-marks.ts';
import { DueSweep } from './sweep.ts';
import { SYNC_WAIT_MS, SyncDeadlines } from './sync-deadline.ts';
import type { SyncRelayContext } from './sync-relay.ts';
import type { SendWaiters } from './waiters.ts';

/**
 * What the send queue's parts call back into the queue itself (queue.ts `SendQueue`): its methods of the same names,
 * which the parts reach through the queue so that they run with its own state.
 */
export interface QueueHooks {
  /** Tells the queue of an instance that it may have work (`SendQueue.wake`). */
  wake(instanceId: string): void;
  /** Records a status report, never throwing (`SendQueue.report`). */
  report(instanceId: string, report: SendStatusReport): Promise<void>;
  /** The instance's pace and pause (`SendQueue.pacing`). @throws the store's error. */
  pacing(instanceId: string): Promise<StoredPacing>;
  /** The instance's pause in force now, or null (`SendQueue.pause`). @throws the store's error. */
  pause(instanceId: string): Promise<SendPause | null>;
  /** Stores a new job with the others of this turn (`SendQueue.store`). */
  store(job: NewSendJob, late?: LateFailure): Promise<'stored' | 'moved' | 'failed' | 'refused'>;
  /** The wait for a job left to the queue (`SendQueue.waitFor`). */
  waitFor(job: Pick<SendJob, 'instanceId' | 'id'>, signal?: WaitSignal): Promise<SentMessage>;
}

/** The parts of a send queue, made together by {@link queueParts}. */
export interface QueueParts {
  /** The queue state of each instance this process was asked to send for (runners.ts). */
  runners: Runners;
  /** The instances' pace, pauses and reach-out timelocks (pause.ts). */
  pace: PaceKeeper;
  /** The group commit of new jobs (group-insert.ts). */
  inserts: GroupInsert;
  /** The relay of one claimed job and its outcome (relay.ts). */
  jobs: JobRelay;
  /** The periodic look for instances with due jobs (sweep.ts). */
  sweep: DueSweep;
  /** The deadlines of synchronous sends waiting in the queue (sync-deadline.ts). */
  deadlines: SyncDeadlines;
  /** What one pass of an instance's drain uses (drain.ts). */
  drainContext: DrainContext;
  /** What a synchronous send's store and relay use (sync-relay.ts). */
  syncContext: SyncRelayContext;
  /** Runs a relay's store call, waiting out an unreachable store until the queue stops. */
  untilStored: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * Makes the parts of a send queue over `deps` (docs/decisions/0009-sends-as-jobs.md, 0013-pacing.md), each given
 * what it uses of the others: the queue's `waiters` and `sentMarks`, its `stopping` signal (aborted when the queue
 * stops: the waits of its writes on an unreachable store end then), and the queue's own methods as `hooks`. A relay's
 * own writes wait out a store that cannot be reached until the queue stops: once a job is claimed, its outcome is
 * stored before anyone is told it, so a store outage never leaves a job `sending` for a second relay after its
 * request answered (docs/decisions/0011-store-faults.md). Cheap, no I/O; nothing is started (the sweep starts with
 * the queue).
 */
export function queueParts(
  deps: SendQueueDeps,
  shared: { waiters: SendWaiters; sentMarks: SentMarks; stopping: AbortSignal },
  hooks: QueueHooks,
): QueueParts {
  const { waiters, sentMarks, stopping } = shared;
  const recordWith = <T>(instanceId: string, write: ReportedWrite<T>) => deps.recordWith(instanceId, write);
  const report = (instanceId: string, each: SendStatusReport) => hooks.report(instanceId, each);
  const pacing = (instanceId: string) => hooks.pacing(instanceId);
  const runners = new Runners(
    deps.clock,
    (instanceId) => hooks.wake(instanceId),
    (instanceId) => deps.session(instanceId) !== undefined,
  );
  // Due times on the store's clock, everything else on the business clock (docs/decisions/0112-send-due-times-on-the-store-clock.md).
  const dueClock = dueClockOf(deps);
  const sweep = new DueSweep({
    db: deps.db,
    clock: dueClock,
    logger: deps.logger,
    everyMs: deps.sweepMs ?? 5_000,
    // Only a queue held here, not draining and not already set to wake later; but a queue whose memory says nothing
    // is due while the store holds a due job (a send another node stored as the instance moved) forgets that memory
    // and is woken at once (docs/decisions/0111-status-reads-the-queue-it-holds.md).
    due: (instanceId) => {
      if (!deps.session(instanceId)) return;
      const runner = runners.peek(instanceId);
      const unheardOf = runner !== undefined && knownNothingDue(runner, dueClock());
      if (runner !== undefined && unheardOf) runner.idle = false;
      if (unheardOf || (!runner?.draining && !runner?.timer)) hooks.wake(instanceId);
    },
  });
  const deadlines = new SyncDeadlines({
    db: deps.db,
    clock: deps.clock,
    logger: deps.logger,
    waiters,
    waitMs: deps.syncWaitMs ?? SYNC_WAIT_MS,
    nodeId: deps.nodeId,
    recordWith,
    report,
  });
  const pace = new PaceKeeper({ db: deps.db, clock: deps.clock, logger: deps.logger, recordWith });
  // Every write waiting out the store listens to the stop signal: no bound on their number.
  setMaxListeners(0, stopping);
  const untilStored = <T>(work: () => Promise<T>): Promise<T> =>
    untilStoreAnswers(work, deps.clock, Number.POSITIVE_INFINITY, stopping);
  const inserts = new GroupInsert(deps.db, deps.clock, untilStored);
  const failures = new RelayFailures({
    untilStored,
    db: deps.db,
    clock: deps.clock,
    dueClock,
    nodeId: deps.nodeId,
    logger: deps.logger,
    waiters,
    pace,
    report,
    recordWith,
    schedule: (instanceId, delayMs) => runners.schedule(instanceId, delayMs),
    follow: (job, since) => deadlines.follow(job, since),
    left: (job) => runners.peek(job.instanceId)?.relaying.leave(job.id),
  });
  const jobs = new JobRelay({
    untilStored,
    db: deps.db,
    clock: deps.clock,
    nodeId: deps.nodeId,
    random: deps.random ?? Math.random,
    runners,
    pace,
    failures,
    sentMarks,
    waiters,
    report,
    recordWith,
  });
  const drainContext: DrainContext = {
    db: deps.db,
    clock: deps.clock,
    dueClock,
    nodeId: deps.nodeId,
    logger: deps.logger,
    session: deps.session,
    stopped: () => stopping.aborted,
    pacing,
    pace,
    runners,
    jobs,
    recordWith,
    waiters,
    report,
  };
  const syncContext: SyncRelayContext = {
    nodeId: deps.nodeId,
    clock: deps.clock,
    dueClock,
    runners,
    deadlines,
    waiters,
    jobs,
    untilStored,
    pacing,
    pause: (instanceId) => hooks.pause(instanceId),
    store: (job, late) => hooks.store(job, late),
    waitFor: (job, signal) => hooks.waitFor(job, signal),
    wake: (instanceId) => hooks.wake(instanceId),
  };
  return { runners, pace, inserts, jobs, sweep, deadlines, drainContext, syncContext, untilStored };
}
