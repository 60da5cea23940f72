import type { Clock } from '../domain/clock.ts';
import type { SentMessage } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import type { SendPause } from '../domain/sends.ts';
import { eitherSignal, type WaitSignal, Withdrawal } from '../domain/withdrawal.ts';
import type { EngineSession } from '../engines/engine.ts';
import { claimedSendJob, type LateFailure, type NewSendJob, type SendJob } from '../store/send-jobs.ts';
import type { StoredPacing } from '../store/send-pacing.ts';
import { loggedOutBeforeRelay } from './logout.ts';
import type { JobRelay } from './relay.ts';
import { askHandBack, awaitsLogin, endImmediate, type Runner, type Runners } from './runners.ts';
import type { SyncDeadlines } from './sync-deadline.ts';
import type { SendWaiters } from './waiters.ts';

/** What a synchronous send's store and relay use (the send queue's parts, queue.ts `SendQueue`). */
export interface SyncRelayContext {
  /** This node's id: the `locked_by` of a job stored already claimed. */
  nodeId: string;
  /** The business clock (queue-deps.ts `SendQueueDeps.clock`). */
  clock: Clock;
  /**
   * The clock jobs' due times are judged on, the store's (queue-deps.ts `dueClockOf`;
   * docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  dueClock: Clock;
  runners: Runners;
  deadlines: SyncDeadlines;
  waiters: SendWaiters;
  jobs: JobRelay;
  /** Runs a relay's store call, waiting out an unreachable store until the queue stops. */
  untilStored<T>(work: () => Promise<T>): Promise<T>;
  /** The instance's pace and pause (queue.ts `SendQueue.pacing`). */
  pacing(instanceId: string): Promise<StoredPacing>;
  /** The instance's pause in force now, or null. */
  pause(instanceId: string): Promise<SendPause | null>;
  /** Stores a new job with the others of this turn: group-insert.ts `GroupInsert.store`. */
  store(job: NewSendJob, late?: LateFailure): Promise<'stored' | 'moved' | 'failed' | 'refused'>;
  /** The wait for a job left to the queue (queue.ts `SendQueue.waitFor`). */
  waitFor(job: Pick<SendJob, 'instanceId' | 'id'>, signal?: WaitSignal): Promise<SentMessage>;
  /** Wakes the instance's queue (queue.ts `SendQueue.wake`). */
  wake(instanceId: string): void;
}

/**
 * True when a synchronous send of the instance may relay at once, without waiting behind other jobs: the queue
 * drained once since this process took the instance, handed back the `sending` jobs since the last login, does not
 * wait for a login after a relay whose outcome is unknown (runners.ts `awaitsLogin`), has
 * claimed no job since its last drain left nothing due (`Runner.idle`: no job of its being relayed, none waiting
 * for its retry, docs/decisions/0009-sends-as-jobs.md: the send would pass it), no job has become due since (a
 * scheduled send whose time came before the queue's wake for it ran, `Runner.idleUntil`), no job submitted since is
 * waiting to be claimed, and no pace is set (a pause does not hold synchronous sends: queued ones wait for its end).
 * The queue's state is this process's memory, no statement of its own (docs/decisions/0013-pacing.md: a send never
 * overtakes one accepted before it). When true, the send is counted among the runner's immediate relays in the same
 * step (`Runner.immediate`: the drain claims nothing until they end), and the caller must end it ({@link endNow}).
 * @throws the store's error reading the pace or the pause.
 */
async function canRelayNow(context: SyncRelayContext, instanceId: string, runner: Runner): Promise<boolean> {
  if (!runner.reclaimed || awaitsLogin(runner)) return false;
  const { pacing } = await context.pacing(instanceId);
  const paced = pacing.minIntervalMs !== 0 || pacing.jitterMs !== 0 || pacing.newChatsPerDay !== null;
  if (paced) return false;
  // Read after the pace: the drain may have started meanwhile.
  let now = runner.idle && runner.queued === 0 && context.dueClock() < runner.idleUntil;
  // While a restriction pauses the queue, queued sends wait; a synchronous one is relayed and gets the
  // platform's own answer (docs/decisions/0013-pacing.md).
  if (!now) now = (await context.pause(instanceId)) !== null;
  if (now) runner.immediate += 1;
  return now;
}

/** Ends an immediate relay counted by {@link canRelayNow}, waking the queue when a drain waited for it. */
function endNow(context: SyncRelayContext, instanceId: string, runner: Runner): void {
  if (endImmediate(runner)) context.wake(instanceId);
}

/**
 * Stores a synchronous send's job (docs/decisions/0009-sends-as-jobs.md) and returns the wait for its outcome, to
 * be called at once: when the queue is idle, unpaced and unpaused the row is stored already claimed by this node
 * and the wait relays it through `session`; otherwise it is stored `pending` and the wait lasts until the queue
 * relayed it in its turn, or fails it unsent (`504 timeout`) when no relay claimed it within the sync wait
 * (sync-deadline.ts). An immediate job is held by this process from before its row exists until its relay
 * ends, so a login committed meanwhile does not hand it back for a second relay (store/send-job-claims.ts
 * `reclaimSendingJobs`). The wait resolves with the relay's result or rejects with its error (the job is then
 * `failed`). A job whose lost answer's write found it changed by a relay is followed in the store (sync-deadline.ts
 * `follow`). When `signal` aborts (the client went away) the wait is withdrawn: the outcome becomes a
 * `MessageStatus` event. With `sameAccount` false (the session's account logged out, or another linked, since the
 * send was accepted) the job is never stored claimed: it is stored `pending`, for the caller to cancel
 * (docs/decisions/0074-logout-cancels-pending-sends.md), never relayed at once from another account.
 * @throws the store's error (nothing was relayed; store faults as `store_unavailable`,
 *   docs/decisions/0011-store-faults.md); DomainError `timeout` for a job stored claimed after its sync wait had
 *   passed (the store answered late): it is failed unsent; DomainError conflict `LOGGED_OUT_BEFORE_RELAY` when the
 *   insert found the instance's account generation moved since the send was accepted (`job.account`): nothing stored.
 */
export async function storeSync(
  context: SyncRelayContext,
  session: EngineSession,
  job: NewSendJob,
  signal?: WaitSignal,
  sameAccount: () => boolean = () => true,
): Promise<() => Promise<SentMessage>> {
  const { deadlines } = context;
  // A queue this process never drained has no runner yet: the job waits its turn behind the first hand-back.
  const runner = context.runners.peek(job.instanceId);
  // The wait of a job left to the queue: its deadline counts from its acceptance; one a relay changed before a
  // lost answer's write found it is followed in the store.
  const queued = (ours: boolean) => () =>
    ours
      ? deadlines.watch(job, context.waitFor(job, signal), job.now)
      : deadlines.followed(job, context.waitFor(job, signal));
  const claimed = extended(job, { claimedBy: context.nodeId });
  let now = false;
  // Held before the pace is read: a login committed meanwhile hands back the `sending` jobs without this one.
  runner?.relaying.hold(job.id);
  try {
    now = runner !== undefined && sameAccount() && (await canRelayNow(context, job.instanceId, runner));
    const stored = now ? claimed : job;
    const written = await context.store(stored, deadlines.lateFailure(job));
    if (written === 'failed') throw deadlines.timedOut();
    // A logout committed since the send was accepted: nothing stored (docs/decisions/0074-logout-cancels-pending-sends.md).
    if (written === 'refused') throw loggedOutBeforeRelay();
    let ours = written === 'stored';
    if (ours) {
      // Stored past the sync wait (the store answered late): failed unsent, never relayed after its client gave
      // up (sync-deadline.ts).
      const late = await context.untilStored(() => deadlines.failLate(stored));
      if (late === 'failed') throw deadlines.timedOut();
      ours = late === 'on-time';
    }
    if (!now || !ours || runner === undefined) {
      if (runner !== undefined) context.runners.release(job.instanceId, runner, job.id);
      if (now && runner !== undefined) endNow(context, job.instanceId, runner);
      return queued(ours);
    }
    const held = claimedSendJob(claimed);
    return () => relayNow(context, session, held, runner, signal);
  } catch (error) {
    if (runner !== undefined) context.runners.release(job.instanceId, runner, job.id);
    if (now && runner !== undefined) endNow(context, job.instanceId, runner);
    throw error;
  }
}

/**
 * Relays `job` (stored already claimed by this node, held in `runner` by {@link storeSync}, counted among its
 * immediate relays) at once through `session`, gives back that hold and ends that count (waking the queue when a
 * drain waited for it), and resolves with the result.
 * @throws the relay's error after the job was marked failed.
 */
async function relayNow(
  context: SyncRelayContext,
  session: EngineSession,
  job: SendJob,
  runner: Runner,
  signal: WaitSignal | undefined,
): Promise<SentMessage> {
  let done: Promise<SentMessage>;
  let failed = false;
  // Withdraws this request's wait when the relay throws (below): the request answers that error, and no waiter may be
  // left behind to take the outcome of the job's next relay, whose event would be left out for it.
  const thrown = new Withdrawal();
  try {
    // Read before the request waits (the store waited out like the relay's writes; a queue stopping meanwhile
    // leaves the job to the instance's next holder, with no waiter left behind to hide its outcome's event).
    const { pacing } = await context.untilStored(() => context.pacing(job.instanceId));
    done = context.waiters.await(job, signal === undefined ? thrown : eitherSignal(signal, thrown));
    // The relay may settle `done` before it returns (a refusal, then the pause's writes): mark it handled now,
    // the caller still gets its result or error below.
    done.catch(() => undefined);
    await context.jobs.relay(session, job, pacing);
  } catch (error) {
    failed = true;
    thrown.withdraw(error);
    throw error;
  } finally {
    // The store failed otherwise than by an outage the relay waits out (relay.ts): the job may be left `sending`
    // with no relay of it. The queue hands it back before its next claim, as after a drain's failure (drain.ts),
    // not at the next login (docs/decisions/0009-sends-as-jobs.md). Asked for before the relay's end wakes a drain
    // that held its claim back for it, which would otherwise claim a job accepted behind this one first.
    if (failed) {
      askHandBack(runner);
      runner.idle = false;
      context.runners.schedule(job.instanceId, 1_000);
    }
    // The relay ended: a job it left to another holder (failures.ts) is no longer held here, so a later login
    // hands it back if that holder died.
    context.runners.release(job.instanceId, runner, job.id);
    endNow(context, job.instanceId, runner);
  }
  return done;
}
