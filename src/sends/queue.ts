import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { DomainError } from '../domain/errors.ts';
import type { EngineEvent, SentMessage } from '../domain/messages.ts';
import type { PacingSettings, SendPause } from '../domain/sends.ts';
import type { WaitSignal } from '../domain/withdrawal.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { EventProjection } from '../events/recorder.ts';
import { runRidingMarks } from '../store/advance-marks.ts';
import { outcomeUnknown } from '../store/faults.ts';
import type { Database } from '../store/schema.ts';
import { countDueSendJobs } from '../store/send-job-claims.ts';
import type { LateFailure, NewSendJob, SendJob } from '../store/send-jobs.ts';
import type { StoredPacing } from '../store/send-pacing.ts';
import { AccountGenerations } from './account-generations.ts';
import { type DrainContext, drain } from './drain.ts';
import type { GroupInsert } from './group-insert.ts';
import { isLogin, loggedIn, loggedOut } from './logins.ts';
import { endAccountOnLogout, loggedOutBeforeRelay } from './logout.ts';
import type { PaceKeeper } from './pause.ts';
import { dueClockOf, type ReportedWrite, type SendQueueDeps, type SendStatusReport } from './queue-deps.ts';
import { queueParts } from './queue-parts.ts';
import type { JobRelay } from './relay.ts';
import { knownNothingDue, type Runners, unreleased } from './runners.ts';
import { SentMarks } from './sent-marks.ts';
import type { DueSweep } from './sweep.ts';
import type { SyncDeadlines } from './sync-deadline.ts';
import { type SyncRelayContext, storeSync } from './sync-relay.ts';
import { SendWaiters } from './waiters.ts';

export type { ReportedWrite, SendQueueDeps, SendStatusReport } from './queue-deps.ts';

/**
 * The send queue of every instance whose engine session this process holds (docs/decisions/0009-sends-as-jobs.md,
 * 0013-pacing.md). Jobs are rows (`send_jobs`); the queue claims an instance's due jobs one at a time in
 * acceptance order, waits for the pace and for the session to be connected, relays each under its own id and
 * records the outcome. A restriction signal from the platform (429 rate-overlimit, 463 reach-out timelock) pauses
 * the instance's queue until its end. A synchronous send whose queue is idle, unpaced and unpaused relays at once
 * (stored already claimed); otherwise it waits its turn. It is also a projection of the event recorder: a committed
 * login wakes the instance's queue, and so does a login whose recording was given up. Its parts: the group insert
 * of new jobs (group-insert.ts), the waiting requests (waiters.ts), the pace and pauses (pause.ts), one job's relay
 * (relay.ts) and the fate of a failed one (failures.ts), what a login and a logout change (logins.ts), a
 * synchronous send stored and relayed at once (sync-relay.ts), the jobs marked sent in the recorder's transactions
 * (sent-marks.ts), each instance's queue state and wake timer (runners.ts), one pass of an instance's drain
 * (drain.ts), the deadlines of synchronous sends waiting their turn (sync-deadline.ts) and the sweep for due jobs
 * (sweep.ts), made together by queue-parts.ts.
 */
export class SendQueue implements EventProjection {
  readonly name = 'send-queue';
  readonly #deps: SendQueueDeps;
  /** The clock due times are set and judged on ({@link dueNow}). */
  readonly #dueClock: Clock;
  /** The queue state of each instance this process was asked to send for (runners.ts). */
  readonly #runners: Runners;
  /** The requests waiting for their job's outcome (waiters.ts). */
  readonly #waiters = new SendWaiters();
  /** Jobs (`instanceId/id`) the API is canceling: what a request waiting for each is answered once it commits. */
  readonly #cancelErrors = new Map<string, DomainError>();
  /** The instances' pace, pauses and reach-out timelocks (pause.ts). */
  readonly #pace: PaceKeeper;
  /** The group commit of new jobs (group-insert.ts). */
  readonly #inserts: GroupInsert;
  /** The account generations sends are accepted under (account-generations.ts). */
  readonly #accounts: AccountGenerations;
  /** The relay of one claimed job and its outcome (relay.ts). */
  readonly #jobs: JobRelay;
  /** The periodic look for instances with due jobs (sweep.ts). */
  readonly #sweep: DueSweep;
  /** The deadlines of synchronous sends waiting in the queue (sync-deadline.ts). */
  readonly #deadlines: SyncDeadlines;
  /** What one pass of an instance's drain uses (drain.ts). */
  readonly #drainContext: DrainContext;
  /** What a synchronous send's store and relay use (sync-relay.ts). */
  readonly #syncContext: SyncRelayContext;
  /**
   * Aborted when the queue stops: it then claims nothing more, and the waits of its writes on an unreachable store
   * end at once.
   */
  readonly #stopping = new AbortController();
  /** Runs a relay's store call, waiting out an unreachable store until the queue stops. */
  readonly #untilStored: <T>(work: () => Promise<T>) => Promise<T>;
  readonly #inFlight = new Set<Promise<void>>();
  /** The jobs marked sent in the recorder's transactions (sent-marks.ts). */
  readonly #sentMarks = new SentMarks();

  /** This node's id, the `locked_by` of the jobs it holds. */
  readonly nodeId: string;

  /** Cheap, no I/O: makes the queue's parts (queue-parts.ts); {@link start} starts its sweep. */
  constructor(deps: SendQueueDeps) {
    this.#deps = deps;
    this.#dueClock = dueClockOf(deps);
    this.nodeId = deps.nodeId;
    const parts = queueParts(
      deps,
      { waiters: this.#waiters, sentMarks: this.#sentMarks, stopping: this.#stopping.signal },
      {
        wake: (instanceId) => this.wake(instanceId),
        report: (instanceId, report) => this.report(instanceId, report),
        pacing: (instanceId) => this.pacing(instanceId),
        pause: (instanceId) => this.pause(instanceId),
        store: (job, late) => this.store(job, late),
        waitFor: (job, signal) => this.waitFor(job, signal),
      },
    );
    this.#runners = parts.runners;
    this.#pace = parts.pace;
    this.#inserts = parts.inserts;
    this.#accounts = new AccountGenerations(deps.db);
    this.#jobs = parts.jobs;
    this.#sweep = parts.sweep;
    this.#deadlines = parts.deadlines;
    this.#drainContext = parts.drainContext;
    this.#syncContext = parts.syncContext;
    this.#untilStored = parts.untilStored;
  }

  /** Nothing to write for an event itself: see {@link derive}. */
  async apply(_trx: Transaction<Database>, _instanceId: string, _event: EngineEvent): Promise<void> {}

  /**
   * Marks `sent` the jobs of the batch's own `message` events that are being relayed, so each message row and its
   * job's outcome commit together: in one statement, or, on PostgreSQL when a request waits for each of them, with
   * the batch's sequence advance (sent-marks.ts `mark`); {@link derive} then reads the outcome per event.
   */
  async prepare(
    trx: Transaction<Database>,
    instanceId: string,
    events: readonly EngineEvent[],
  ): Promise<void> {
    await this.#sentMarks.mark(trx, instanceId, events, this.#deps.clock, (job) => this.#waiters.has(job));
  }

  /**
   * Makes the batch's sent marks that were to ride on its sequence's advance and that no advance took (src/store/
   * advance-marks.ts `runRidingMarks`: the batch advanced no sequence), before its transaction commits.
   */
  async flush(trx: Transaction<Database>, instanceId: string): Promise<void> {
    await runRidingMarks(trx, instanceId);
  }

  /**
   * A recorded own `message` whose send job was being relayed (marked `sent` by {@link prepare}): a queued send
   * yields its `MessageStatus` `sent` event, in the same transaction; a synchronous send whose request waits yields
   * none, the answer being its outcome, which stays owed to the request until answered: the relay records the event
   * if every such request has left by then (waiters.ts `carry`, docs/decisions/0009-sends-as-jobs.md); the receipts
   * held for the job follow it (docs/decisions/0104-receipts-before-their-send.md). A
   * `SessionStatus` `logged_out` ends the account's pending sends and pacing state in the same transaction (logout.ts
   * `endAccountOnLogout`, docs/decisions/0074-logout-cancels-pending-sends.md, docs/decisions/0013-pacing.md).
   */
  async derive(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<EngineEvent[]> {
    if (event.type === 'sessionStatus') return endAccountOnLogout(trx, instanceId, event);
    // A synchronous job relayed after its node died has no waiter: its outcome is an event, as a queued one's.
    return this.#sentMarks.derive(trx, instanceId, event, (job, at) => this.#waiters.carry(job, at));
  }

  /**
   * A committed own `message` counts as recorded for its relay (sent-marks.ts `committed`); a committed logout drops
   * what this process remembers of the account (logins.ts `loggedOut`); a committed login (connected and logged in)
   * wakes the instance's queue after a new hold on it (logins.ts `loggedIn`).
   */
  afterCommit(instanceId: string, event: EngineEvent): void {
    const carried = this.#sentMarks.committed(instanceId, event);
    if (carried !== undefined && event.type === 'message')
      this.#waiters.owe({ instanceId, id: event.message.id }, carried);
    // A job its account's logout canceled (logout.ts), or the API's cancel (its own answer): a synchronous request
    // still waiting for it is answered now.
    if (event.type === 'messageStatus' && event.status === 'canceled') {
      const error = this.#cancelErrors.get(`${instanceId}/${event.id}`) ?? loggedOutBeforeRelay();
      this.#waiters.settle({ instanceId, id: event.id }, undefined, error);
      return;
    }
    if (event.type === 'sessionStatus' && event.status === 'logged_out') {
      loggedOut(this.#runners, this.#pace, instanceId);
      this.#accounts.loggedOut(instanceId);
      return;
    }
    if (!isLogin(event)) return;
    loggedIn(this.#runners, this.#pace, instanceId);
    this.wake(instanceId);
  }

  /**
   * A login whose state could not be recorded (its recording given up: a permanent store error, an unknown one
   * tried too often) is a login all the same while this process holds the instance's session: the engine's
   * connection is what the queue relays on, so the queue hands back and drains as after a committed login
   * (docs/decisions/0009-sends-as-jobs.md). Before, it waited for a recorded login, and a relay left unconfirmed kept
   * it from claiming anything until some later reconnect. A session not held here (released meanwhile) is left to
   * its holder, which hands back at its own login.
   */
  unrecorded(instanceId: string, event: EngineEvent): void {
    if (!isLogin(event) || this.#deps.session(instanceId) === undefined) return;
    loggedIn(this.#runners, this.#pace, instanceId);
    this.wake(instanceId);
  }

  /**
   * The store's clock now, epoch ms, as this node estimates it (`SendQueueDeps.storeClock`, else the business clock;
   * in memory, no statement): a send not scheduled is due at this time (its `run_at`), so it is due at once for
   * every node whatever their wall clocks (docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  dueNow(): number {
    return this.#dueClock();
  }

  /** Starts the periodic look for instances with due jobs (scheduled sends, jobs of restored sessions). */
  start(): void {
    this.#sweep.start();
  }

  /** Stops claiming; waits for the relays in flight (at most `timeoutMs`). Jobs left pending stay stored. */
  async stop(timeoutMs = 5_000): Promise<void> {
    this.#stopping.abort();
    this.#sweep.stop();
    this.#deadlines.stop();
    this.#runners.clearTimers();
    await Promise.race([
      Promise.allSettled([...this.#inFlight]),
      new Promise((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
  }

  /**
   * The instance's pace and pause (cached while this process holds the instance, read again at each new hold and
   * after a logout: the holder is the only writer). A process holding no session of the instance (a read it serves
   * while no node holds it) reads the store each time: its cache would keep what it read while it last held the
   * instance, such as the pause of an account that logged out since on another node (docs/decisions/0013-pacing.md).
   * @throws the store's error.
   */
  pacing(instanceId: string): Promise<StoredPacing> {
    if (this.#deps.session(instanceId) === undefined) this.#pace.forget(instanceId);
    return this.#pace.pacing(instanceId);
  }

  /**
   * Stores the instance's pace (pause.ts `PaceKeeper.setPacing`) and counts its interval from the last relay
   * (docs/decisions/0013-pacing.md): the next relay may go at that relay's time plus the new interval and jitter,
   * later for a longer interval, sooner for a shorter one; then wakes the queue (a shorter interval may let a job go
   * now). @throws the store's error (nothing changed in memory).
   */
  async setPacing(instanceId: string, pacing: PacingSettings): Promise<StoredPacing> {
    await this.#pace.setPacing(instanceId, pacing);
    const runner = this.#runners.peek(instanceId);
    if (runner?.lastRelayAt !== undefined) this.#jobs.paced(runner, pacing, runner.lastRelayAt);
    // Another cap (or none) may free slots for the sends waiting for one: looked at in the next pass.
    if (runner) runner.slotCheckAt = 0;
    this.wake(instanceId);
    return this.pacing(instanceId);
  }

  /**
   * The instance's pause in force at `now`, or null; read from the store by a process holding no session of the
   * instance, as {@link pacing} says. @throws the store's error.
   */
  pause(instanceId: string): Promise<SendPause | null> {
    if (this.#deps.session(instanceId) === undefined) this.#pace.forget(instanceId);
    return this.#pace.pause(instanceId);
  }

  /**
   * How many of the instance's sends are due and not relayed yet (src/store/send-job-claims.ts `countDueSendJobs`,
   * at the store's clock, {@link dueNow}): what the session status shows while they wait (docs/decisions/0016-session-lifecycle.md).
   * 0 without a statement while this process's queue knows none is due (runners.ts `knownNothingDue`: it holds the
   * connected session and its last drain left nothing due; docs/decisions/0111-status-reads-the-queue-it-holds.md).
   * @throws the store's error.
   */
  pendingSends(instanceId: string): Promise<number> {
    const now = this.dueNow();
    const runner = this.#runners.peek(instanceId);
    const state = this.#deps.session(instanceId)?.state();
    if (runner !== undefined && state?.loggedIn === true && state.connected && knownNothingDue(runner, now))
      return Promise.resolve(0);
    return countDueSendJobs(this.#deps.db, instanceId, now);
  }

  /**
   * The account generation a send of the instance accepted now through `session` (undefined: none here) is stored
   * under (`NewSendJob.account`; account-generations.ts `AccountGenerations.of`). @throws the store's error.
   */
  accountGeneration(instanceId: string, session: EngineSession | undefined): Promise<number> {
    return this.#accounts.of(instanceId, session);
  }

  /**
   * Stores a new job (docs/decisions/0009-sends-as-jobs.md: a send is stored before its relay) with the others of
   * this turn (group commit), a write whose answer was lost written again until the store answers: `late`, the
   * result and the errors as group-insert.ts `GroupInsert.store` says.
   */
  store(job: NewSendJob, late?: LateFailure): Promise<'stored' | 'moved' | 'failed' | 'refused'> {
    return this.#inserts.store(job, late);
  }

  /**
   * Stores a synchronous send's job (docs/decisions/0009-sends-as-jobs.md) and returns the wait for its outcome, to
   * be called at once: when the queue is idle, unpaced and unpaused the row is stored already claimed by this node
   * and the wait relays it through `session`; otherwise it is stored `pending` and the wait lasts until the queue
   * relayed it in its turn, or fails it unsent (`504 timeout`) when no relay claimed it within the sync wait
   * (sync-deadline.ts), as sync-relay.ts `storeSync` says. The wait resolves with the relay's result or rejects with
   * its error (the job is then `failed`). When `signal` aborts (the client went away) the wait is withdrawn: the
   * outcome becomes a `MessageStatus` event. With `sameAccount` false (the account logged out, or another linked,
   * since the send was accepted) it is stored `pending`, never relayed at once (sync-relay.ts `storeSync`).
   * @throws the store's error (nothing was relayed; store faults as `store_unavailable`,
   *   docs/decisions/0011-store-faults.md); DomainError `timeout` for a job stored claimed after its sync wait had
   *   passed (the store answered late): it is failed unsent.
   */
  storeSync(
    session: EngineSession,
    job: NewSendJob,
    signal?: WaitSignal,
    sameAccount?: () => boolean,
  ): Promise<() => Promise<SentMessage>> {
    return storeSync(this.#syncContext, session, job, signal, sameAccount);
  }

  /**
   * Resolves with the result of job `job` (a sync job submitted for the queue), or rejects with its error; a wait
   * whose `signal` aborts first is withdrawn and rejects with the signal's reason (waiters.ts).
   */
  waitFor(job: Pick<SendJob, 'instanceId' | 'id'>, signal?: WaitSignal): Promise<SentMessage> {
    const done = this.#waiters.await(job, signal);
    this.submitted(job.instanceId);
    return done;
  }

  /**
   * {@link waitFor} for a job stored by an earlier forward of the same request, under the sync wait's deadline
   * counted from the job's acceptance (`createdAt`, sync-deadline.ts).
   */
  waitForStored(job: SendJob, signal?: WaitSignal): Promise<SentMessage> {
    return this.#deadlines.watch(job, this.waitFor(job, signal), job.createdAt);
  }

  /** A job due now was stored for the queue of `instanceId` (synchronous sends wait behind it): wakes the queue. */
  submitted(instanceId: string): void {
    this.#runners.get(instanceId).queued += 1;
    this.wake(instanceId);
  }

  /**
   * A scheduled job due at `runAt` (epoch ms) was stored for the queue of `instanceId`: from then on synchronous sends
   * wait behind it (runners.ts `Runner.idleUntil`), even before the queue's wake for it has run; wakes the queue, which
   * sets that wake.
   */
  scheduled(instanceId: string, runAt: number): void {
    const runner = this.#runners.get(instanceId);
    runner.idleUntil = Math.min(runner.idleUntil, runAt);
    this.wake(instanceId);
  }

  /** Tells the queue of `instanceId` that it may have work (a new job, a login, a pace change). */
  wake(instanceId: string): void {
    if (this.#stopping.signal.aborted) return;
    const runner = this.#runners.get(instanceId);
    if (runner.draining) {
      runner.again = true;
      return;
    }
    const work = drain(this.#drainContext, instanceId, runner).finally(() => this.#inFlight.delete(work));
    this.#inFlight.add(work);
  }

  /**
   * Runs `write` in a transaction that records its `MessageStatus` reports with it (`SendQueueDeps.recordWith`,
   * docs/decisions/0076-status-with-its-write.md): the API's cancel writes the job's `canceled` and its event together.
   * A `MessageStatus canceled` of job `canceling.id` committed by it answers a request waiting for that job with
   * `canceling.error` (the API's own answer), not with a logout's ({@link afterCommit}).
   * @returns the write's result, once committed.
   * @throws the write's or the store's error (nothing of it kept; no wait for an unreachable store).
   */
  async recordWith<T>(
    instanceId: string,
    write: ReportedWrite<T>,
    canceling?: { id: string; error: DomainError },
  ): Promise<T> {
    if (!canceling) return this.#deps.recordWith(instanceId, write);
    const key = `${instanceId}/${canceling.id}`;
    this.#cancelErrors.set(key, canceling.error);
    try {
      return await this.#deps.recordWith(instanceId, write);
    } finally {
      if (this.#cancelErrors.get(key) === canceling.error) this.#cancelErrors.delete(key);
    }
  }

  /**
   * A job canceled through the API: a sync request waiting for it is answered with `error`. A send released for a
   * new-chat slot and canceled before its claim gives its slot to the next one waiting (new-chat-slots.ts).
   */
  canceled(job: Pick<SendJob, 'instanceId' | 'id'>, error: DomainError): void {
    this.#waiters.settle(job, undefined, error);
    const runner = this.#runners.peek(job.instanceId);
    if (runner && unreleased(runner, job.id)) this.wake(job.instanceId);
  }

  /**
   * Records a status report, waiting out a store that cannot be reached until it answers or the queue stops
   * (docs/decisions/0011-store-faults.md); another failure, one at the stop, or one whose outcome is unknown (the
   * connection broke during the commit: trying again could record the event twice) is logged, never thrown.
   */
  async report(instanceId: string, report: SendStatusReport): Promise<void> {
    try {
      await this.#untilStored(() =>
        this.#deps.report(instanceId, report).catch((error: unknown) => {
          throw outcomeUnknown(error)
            ? new Error('recording a send status lost its answer', { cause: error })
            : error;
        }),
      );
    } catch (error) {
      this.#deps.logger.error(
        { err: error, instanceId, report: report.status },
        'recording a send status failed',
      );
    }
  }
}
