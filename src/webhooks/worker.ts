import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DEFAULT_WEBHOOK_CONCURRENCY } from '../config/config.ts';
import { OutboundChannel } from '../net/outbound-guard.ts';
import { releaseClaims, returnUnstarted } from '../store/deliveries.ts';
import {
  type ClaimedDelivery,
  type ClaimOptions,
  claimDeliveries,
  claimDeliveriesIn,
} from '../store/delivery-claims.ts';
import {
  type AttemptOutcome,
  type AttemptRecord,
  type FinishInput,
  finishAndStartNext,
  finishAttemptIn,
} from '../store/delivery-finish.ts';
import { nextAttemptOf, startDeliveries } from '../store/delivery-next.ts';
import { isStoreUnavailableError } from '../store/faults.ts';
import { RetryPolicy } from './backoff.ts';
import { sendAttempt } from './sending.ts';
import type { DeliveryWorkerOptions } from './worker-options.ts';

export type { DeliveryWorkerOptions, WebhookWorkerTuning } from './worker-options.ts';

/**
 * Most instances a claim looks at by name (docs/decisions/0053-targeted-claims.md); the others woken wait for the
 * next claim, in the order they were woken.
 */
export const TARGETED_CLAIM_MAX = 32;

/**
 * A lane's next delivery taken to be started by a record: the start decision of the delivery before it, and how to
 * give its own decision to the one after it.
 */
interface TakenDelivery {
  next: ClaimedDelivery;
  before: Promise<boolean>;
  decide: (started: boolean) => void;
}

/** A promise with its resolve function. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** A lane batch in flight: its promise and the claimed deliveries whose attempts have not ended yet. */
interface LaneRun {
  done: Promise<void>;
  /** Deliveries of the batch not yet finished, in `sequence` order (in flight, then not started). */
  pending: ClaimedDelivery[];
  /** Attempts the batch made. */
  attempted: number;
}

/**
 * Delivers queued webhook events (docs/decisions/0005-outbox-and-delivery.md). Claims due rows from the store
 * (several processes can share the queue on PostgreSQL), posts each through the outbound guard with the headers and
 * signatures of docs/decisions/0006-signatures.md, records the attempt and schedules the next one in the row. It
 * keeps no retry state in memory: a process killed at any instant loses nothing: its claims are released by the node
 * registry as soon as the process is known dead (`src/nodes/registry.ts`: at the next boot on the same host, or once
 * its heartbeat lapses), and taken over once stale in any case. A poll timer plus {@link wake} (called when
 * an event was queued or an attempt finished) drive it.
 */
export class DeliveryWorker {
  /** Value of `locked_by` for this worker's claims. */
  readonly id: string;
  readonly #options: DeliveryWorkerOptions;
  readonly #pollMs: number;
  readonly #staleMs: number;
  readonly #concurrency: number;
  readonly #laneBatch: number;
  readonly #laneWindow: number;
  readonly #retry: RetryPolicy;
  /**
   * Lane batches in flight in this process, by lane (`<instanceId>/<endpointId>`,
   * docs/decisions/0035-webhook-endpoints.md): at most one per lane by the claim rule.
   */
  readonly #lanes = new Map<string, LaneRun>();
  #running = false;
  /** Set by {@link stop}: lane batches start no further attempt (also when driven by `runOnce`). */
  #stopping = false;
  #loop: Promise<void> | undefined;
  #wakeRequested = false;
  /**
   * Whether the next claim walks every instance: at start, after a wake naming no instance, a claim that failed,
   * and a claim over every instance that filled every free lane (more may be due). A poll interval since the last
   * walk (`#lastClaimAll`) also makes the next claim one.
   */
  #claimAll = true;
  /**
   * When the last claim over every instance started (`performance.now()`, ms): one starts at least every poll
   * interval.
   */
  #lastClaimAll = Number.NEGATIVE_INFINITY;
  /** Instances whose events were queued (or whose lane batch ended) and not yet looked at, in the order woken. */
  readonly #woken = new Set<string>();
  #sleeper: (() => void) | undefined;

  constructor(options: DeliveryWorkerOptions) {
    this.#options = options;
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#pollMs = options.pollIntervalMs ?? 1000;
    this.#staleMs = options.staleAfterMs ?? 2 * options.timeoutMs + 30_000;
    this.#concurrency = Math.max(1, options.concurrency ?? DEFAULT_WEBHOOK_CONCURRENCY);
    this.#laneBatch = Math.max(1, options.laneBatch ?? 32);
    this.#laneWindow = Math.min(this.#laneBatch, Math.max(1, options.laneWindow ?? 1));
    this.#retry = new RetryPolicy(options.scheduleMs, options.random);
  }

  /** Attempts a delivery gets per round with the configured schedule. */
  get maxAttempts(): number {
    return this.#retry.maxAttempts;
  }

  /** Epoch ms before which a claim counts as stale at time `now`. */
  staleBefore(now: number): number {
    return now - this.#staleMs;
  }

  /** Number of lanes this process is sending on (each with up to `laneWindow` attempts in flight). */
  get inFlight(): number {
    return this.#lanes.size;
  }

  /** Starts claiming. Idempotent. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = false;
    this.#loop = this.#run();
  }

  /**
   * Asks the worker to look for due rows now instead of at the next poll. Never throws. With `instanceId` (events of
   * that instance were queued to the lanes of `endpointIds`, `''` the default webhook; default just that one),
   * nothing happens while this process has an attempt in flight on every one of those lanes: their new deliveries
   * cannot be claimed before those attempts end (docs/decisions/0005-outbox-and-delivery.md order), and each end
   * wakes the worker anyway. This keeps a busy lane's every commit from running a claim query that cannot succeed,
   * while a delivery to an idle endpoint of a busy instance is claimed at once. The claim that follows looks at the
   * lanes of the instances named since the last one only (up to {@link TARGETED_CLAIM_MAX} of them), unless a wake
   * named none (docs/decisions/0053-targeted-claims.md).
   */
  wake(instanceId?: string, endpointIds: readonly string[] = ['']): void {
    if (instanceId === undefined) this.#claimAll = true;
    else if (
      endpointIds.length > 0 &&
      endpointIds.every((endpointId) => this.#lanes.has(`${instanceId}/${endpointId}`))
    )
      return;
    else this.#woken.add(instanceId);
    this.#wakeRequested = true;
    const sleeper = this.#sleeper;
    this.#sleeper = undefined;
    sleeper?.();
  }

  /**
   * Stops claiming, then lets attempts in flight finish for up to `graceMs` (a lane batch starts no further attempt
   * and gives its unstarted deliveries back); claims still held after that are released so another process (or the next start) retries them at once instead of after the stale timeout
   * (docs/decisions/0023-operations.md: shutdown within its budget). An attempt that finishes later does not change
   * its row.
   */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#stopping = true;
    this.wake();
    await this.#loop;
    const pending = [...this.#lanes.values()].map((run) => run.done);
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    const result = await Promise.race([Promise.allSettled(pending).then(() => 'done' as const), timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      const keys = [...this.#lanes.values()].flatMap((run) =>
        run.pending.map((delivery) => ({ eventId: delivery.eventId, endpointId: delivery.endpointId })),
      );
      await releaseClaims(this.#options.store.db, this.id, keys).catch((error: unknown) =>
        this.#options.logger.warn({ err: error }, 'releasing webhook claims at shutdown failed'),
      );
    }
  }

  /**
   * Claims one batch of due deliveries and waits for their attempts (tests and the loop).
   * @returns how many deliveries were attempted.
   */
  async runOnce(): Promise<number> {
    this.#claimAll = true;
    const runs = await this.#claimAndLaunch();
    await Promise.allSettled(runs.map((run) => run.done));
    return runs.reduce((sum, run) => sum + run.attempted, 0);
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#wakeRequested = false;
      await this.#claimAndLaunch();
      if (!this.#running) break;
      if (this.#wakeRequested) continue;
      await new Promise<void>((resolve) => {
        // Waking from a whole poll interval's sleep, the next claim walks every instance (`#lastClaimAll`).
        const timer = setTimeout(() => {
          this.#sleeper = undefined;
          resolve();
        }, this.#pollMs);
        this.#sleeper = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /**
   * Claims lane batches up to the free capacity and starts them; returns the runs started. Looks at every
   * instance, or only at the instances woken since the last claim (docs/decisions/0053-targeted-claims.md).
   */
  async #claimAndLaunch(): Promise<LaneRun[]> {
    const free = this.#concurrency - this.#lanes.size;
    // The instances woken meanwhile stay noted: a lane's end frees capacity and wakes the worker.
    if (free <= 0) return [];
    const { store, clock, logger } = this.#options;
    const now = clock();
    // Retries come due and claims go stale without a wake: every instance is looked at once a poll interval (of
    // real time), also while wakes keep the worker from sleeping until its poll.
    const started = performance.now();
    const all = this.#claimAll || started - this.#lastClaimAll >= this.#pollMs;
    let instances: string[] | undefined;
    if (all) {
      this.#claimAll = false;
      this.#lastClaimAll = started;
      this.#woken.clear();
    } else {
      instances = [];
      for (const instanceId of this.#woken) {
        if (instances.length === TARGETED_CLAIM_MAX) break;
        instances.push(instanceId);
        this.#woken.delete(instanceId);
      }
      if (instances.length === 0) return [];
    }
    const claim: ClaimOptions = {
      workerId: this.id,
      now,
      staleBefore: this.staleBefore(now),
      limit: free,
      perLane: this.#laneBatch,
      ...(instances === undefined ? {} : { instances }),
    };
    const { turn } = this.#options;
    let claimed: ClaimedDelivery[];
    try {
      // On SQLite the claim is a part of the turn's shared transaction (docs/decisions/0051-turn-groups.md),
      // weighing the lanes it may start; its deliveries are sent once that transaction committed.
      claimed = await (turn === undefined
        ? claimDeliveries(store.db, store.dialect, claim)
        : turn.run((trx) => claimDeliveriesIn(trx, store.dialect, claim), free));
    } catch (error) {
      // The instances woken are not forgotten: the next claim (at the next poll) walks every instance.
      this.#claimAll = true;
      logger.warn({ err: error }, 'claiming webhook deliveries failed');
      return [];
    }
    const batches = new Map<string, ClaimedDelivery[]>();
    for (const delivery of claimed) {
      // A delivery is an event to one endpoint (docs/decisions/0035-webhook-endpoints.md); `claimed` is in
      // `sequence` order, so each batch is too.
      const lane = `${delivery.instanceId}/${delivery.endpointId}`;
      const batch = batches.get(lane);
      if (batch === undefined) batches.set(lane, [delivery]);
      else batch.push(delivery);
    }
    // Every free lane taken: more may be due than this claim could take. The next claim looks at the same
    // instances again, or everywhere after a claim over every instance.
    if (batches.size >= free) {
      if (instances === undefined) this.#claimAll = true;
      else for (const instanceId of instances) this.#woken.add(instanceId);
    }
    return [...batches].map(([lane, batch]) => {
      const [first] = batch;
      const run: LaneRun = { done: Promise.resolve(), pending: batch, attempted: 0 };
      run.done = this.#runLane(run)
        .catch((error: unknown) => {
          logger.warn({ err: error, lane }, 'recording a webhook attempt failed');
        })
        .finally(() => {
          // On SQLite a claim in the same shared transaction as this batch's last record may have taken the lane
          // again (docs/decisions/0051-turn-groups.md): that batch is the lane's now.
          if (this.#lanes.get(lane) === run) this.#lanes.delete(lane);
          // Its events queued meanwhile did not wake the worker (the lane was busy): its instance is looked at next.
          if (this.#running)
            this.wake(first?.instanceId, first === undefined ? undefined : [first.endpointId]);
        });
      this.#lanes.set(lane, run);
      return run;
    });
  }

  /**
   * Sends a lane batch (docs/decisions/0048-lane-batches.md) with up to `laneWindow` requests in flight
   * (docs/decisions/0050-lane-windows.md). The head was started by the claim; with a window the next deliveries
   * are started together at once, and from then on each delivered attempt's record starts the lane's next unstarted
   * delivery in the same transaction. Starts are decided one after the other in `sequence` order: a delivery is
   * started only once the one before it was, so a lane never has a later delivery started and an earlier one given
   * back. Nothing more is started once an attempt was not delivered, a start was refused (the claim lost or the lane
   * changed), the worker is stopping or the claim is older than half the stale timeout; the deliveries not started
   * are given back at once, unlocked and ready for the next claim, when the requests in flight have ended.
   * @throws the first error met recording an attempt (after the rest was given back).
   */
  async #runLane(run: LaneRun): Promise<void> {
    const [head, ...queue] = run.pending;
    if (head === undefined) return;
    const { store } = this.#options;
    // A window's requests go out pipelined on one connection, so they reach the receiver in the order they were
    // started (docs/decisions/0058-pipelined-lanes.md).
    const channel = this.#laneWindow > 1 ? new OutboundChannel(this.#laneWindow) : undefined;
    /** Deliveries taken from the queue but not started: given back with the queue's rest at the end. */
    const notStarted: ClaimedDelivery[] = [];
    let halted = false;
    /** The start decision of the delivery taken last: whether it was started. */
    let lastStart: Promise<boolean> = Promise.resolve(true);
    const mayStart = (delivery: ClaimedDelivery) =>
      !halted && !this.#stopping && this.#options.clock() - delivery.lockedAt < this.#staleMs / 2;
    /** Takes the queue's next delivery, with the decision of the one before it and a way to record its own. */
    const take = (): TakenDelivery | undefined => {
      const next = queue.shift();
      if (next === undefined) return undefined;
      const before = lastStart;
      const decision = deferred<boolean>();
      lastStart = decision.promise;
      return { next, before, decide: decision.resolve };
    };
    const finished = (delivery: ClaimedDelivery) => {
      const index = run.pending.indexOf(delivery);
      if (index >= 0) run.pending.splice(index, 1);
    };
    /** Sends `first`, then each next delivery its records start, until one is not started. */
    const slot = async (first: ClaimedDelivery): Promise<void> => {
      let delivery: ClaimedDelivery | undefined = first;
      while (delivery !== undefined) {
        run.attempted += 1;
        const sent = await sendAttempt(this.#options, delivery, channel);
        const taken: TakenDelivery | undefined =
          sent.record.error === null && mayStart(delivery) ? take() : undefined;
        if (sent.record.error !== null) halted = true;
        let nextStarted = false;
        try {
          // Started only after the one before it, and not once an attempt of the batch failed meanwhile.
          const next = taken !== undefined && (await taken.before) && !halted ? taken.next : undefined;
          ({ nextStarted } = await this.#record(delivery, next, sent.record, sent.retryAfter, sent.gone));
        } finally {
          taken?.decide(nextStarted);
          if (taken !== undefined && !nextStarted) {
            halted = true;
            notStarted.push(taken.next);
          }
        }
        finished(delivery);
        delivery = nextStarted ? taken?.next : undefined;
      }
    };

    const first = slot(head);
    // Handled by the `allSettled` below; until then a rejection must not count as unhandled.
    first.catch(() => undefined);
    const slots = [first];
    const opening = queue.splice(0, this.#laneWindow - 1);
    if (opening.length > 0) {
      const decision = deferred<boolean>();
      lastStart = decision.promise;
      let started = 0;
      let unknown = false;
      try {
        if (mayStart(head)) {
          started = await this.#finish(() =>
            startDeliveries(store.db, opening.map(nextAttemptOf), this.id, this.#options.clock()),
          );
        }
      } catch (error) {
        // Whether the transaction committed is unknown: none of them is sent, and they stay claimed, as after a
        // record that could not be written, until the node registry or the stale timeout frees them (an attempt
        // row left open is then marked abandoned).
        unknown = true;
        this.#options.logger.warn({ err: error }, 'starting webhook deliveries failed');
      }
      const allStarted = !unknown && started === opening.length;
      decision.resolve(allStarted);
      if (!allStarted) halted = true;
      if (unknown) opening.splice(0);
      else notStarted.push(...opening.splice(started));
      slots.push(...opening.map((delivery) => slot(delivery)));
    }

    const ended = await Promise.allSettled(slots);
    channel?.close();
    const unstarted = [...notStarted, ...queue.splice(0)];
    if (unstarted.length > 0) {
      for (const delivery of unstarted) finished(delivery);
      await this.#finish(() => returnUnstarted(store.db, this.id, unstarted)).catch((error: unknown) =>
        this.#options.logger.warn({ err: error }, 'giving back unstarted webhook deliveries failed'),
      );
    }
    const failure = ended.find((result) => result.status === 'rejected');
    if (failure !== undefined) throw failure.reason;
  }

  /**
   * Records an attempt's outcome, waiting out a store that cannot be reached (docs/decisions/0011-store-faults.md)
   * for up to half the stale timeout: an attempt the receiver took is recorded as soon as the store answers,
   * instead of its claim holding the instance's later deliveries until it goes stale and the event is sent again.
   * Waits double from 100 ms to at most 5 s.
   * @throws the store's error when it is not an unreachable store, or once half the stale timeout has passed.
   */
  async #finish<T>(work: () => Promise<T>): Promise<T> {
    const { clock } = this.#options;
    const giveUpAt = clock() + this.#staleMs / 2;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (!isStoreUnavailableError(error) || clock() >= giveUpAt) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** (attempt - 1))));
      }
    }
  }

  /**
   * Records an attempt's result and schedules what follows (next attempt, failure, or a 410's disabling). In the
   * same transaction it starts `next`, the lane batch's next delivery, when the attempt was delivered, the worker
   * is not stopping and the claim is younger than half the stale timeout (docs/decisions/0048-lane-batches.md).
   * @returns whether `next` was started (never when the claim was no longer this worker's: the outcome was then
   *   only logged).
   */
  async #record(
    delivery: ClaimedDelivery,
    next: ClaimedDelivery | undefined,
    record: AttemptRecord,
    retryAfter: string | undefined,
    gone: boolean,
  ): Promise<{ nextStarted: boolean }> {
    const { clock } = this.#options;
    let outcome: AttemptOutcome;
    if (record.error === null) outcome = { kind: 'delivered' };
    else if (gone) outcome = { kind: 'gone', reason: 'receiver answered 410 Gone' };
    else {
      // `attempts` was counted when this attempt was claimed: it is this attempt's number in the round.
      const runAt = this.#retry.nextRunAt({
        attemptsMade: delivery.attempts,
        maxAttempts: delivery.maxAttempts,
        now: clock(),
        retryAfter,
      });
      outcome = runAt === null ? { kind: 'failed' } : { kind: 'retry', runAt };
    }
    // Decided at each try: a try after a store outage must not start the next delivery of a claim grown old. A try
    // after one that offered to start it still asks whether that one did (it may have committed unanswered).
    let offered = false;
    const input = (): FinishInput => {
      const now = clock();
      const start =
        next !== undefined &&
        outcome.kind === 'delivered' &&
        !this.#stopping &&
        now - next.lockedAt < this.#staleMs / 2;
      const check = !start && offered && next !== undefined;
      offered ||= start;
      return {
        eventId: delivery.eventId,
        endpointId: delivery.endpointId,
        instanceId: delivery.instanceId,
        attemptId: delivery.attemptId,
        workerId: this.id,
        lockedAt: delivery.lockedAt,
        attempt: record,
        outcome,
        now: new Date(now).toISOString(),
        ...(start || check ? { next: nextAttemptOf(next) } : {}),
        ...(check ? { nextCheckOnly: true } : {}),
      };
    };
    const { store, turn } = this.#options;
    const { applied, nextStarted } = await this.#finish(() => {
      const current = input();
      return turn === undefined
        ? finishAndStartNext(store.db, current, store.dialect)
        : turn.run((trx) => finishAttemptIn(trx, current));
    });
    this.#options.onAttempt?.(outcome.kind, record.durationMs, delivery.instanceId);
    if (!applied) {
      this.#options.logger.info(
        { eventId: delivery.eventId },
        'webhook claim was taken over before the attempt finished; its outcome was only logged',
      );
    }
    return { nextStarted };
  }
}
