import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  DEFAULT_LANE_WINDOW,
  DEFAULT_WEBHOOK_CONCURRENCY,
  DEFAULT_WEBHOOK_MAX_IN_FLIGHT,
} from '../config/env.ts';
import { MAX_CHANNEL_DEPTH } from '../net/outbound-channel.ts';
import { releaseClaims } from '../store/deliveries.ts';
import {
  type ClaimedDelivery,
  type ClaimOptions,
  claimDeliveries,
  claimDeliveriesIn,
  unconfirmedClaim,
} from '../store/delivery-claims.ts';
import { RetryPolicy } from './backoff.ts';
import { ClaimTargets } from './claim-targets.ts';
import { CrossLaneRecords } from './cross-lane-records.ts';
import type { RecorderContext } from './lane-records.ts';
import { type LaneRun, type LaneRunContext, lanesOf, runLane, runsWithoutPlaces } from './lane-run.ts';
import { claimMadeAfterLostCommit } from './lost-claims.ts';
import { RequestPlaces, windowShares } from './request-places.ts';
import { type DeliveryWorkerOptions, storeClockOf } from './worker-options.ts';

export { TARGETED_CLAIM_MAX } from './claim-targets.ts';
export type { DeliveryWorkerOptions, WebhookWorkerTuning } from './worker-options.ts';

/** Deliveries claimed per lane at once when the window is at most 8 (docs/decisions/0048-lane-batches.md). */
export const DEFAULT_LANE_BATCH = 32;

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
  /** Places for the requests in flight over all lanes (docs/decisions/0089-lane-window-default.md). */
  readonly #places: RequestPlaces;
  readonly #retry: RetryPolicy;
  /** What a lane batch's records need (src/webhooks/lane-records.ts). */
  readonly #recorder: RecorderContext;
  /** What its lane batches' runs need (src/webhooks/lane-run.ts). */
  readonly #laneContext: LaneRunContext;
  /**
   * Lane batches in flight in this process, by lane (`<instanceId>/<endpointId>`,
   * docs/decisions/0035-webhook-endpoints.md): at most one per lane by the claim rule.
   */
  readonly #lanes = new Map<string, LaneRun>();
  #running = false;
  /** Set by {@link stop}: lane batches start no further attempt (also when driven by `runOnce`). */
  #stopping = false;
  /** Aborted by {@link stop}: ends the wait for the store of a claim whose commit lost its answer. */
  #stop = new AbortController();
  /**
   * Lanes of the claims whose commit lost its answer while the store is asked whether they were made: the capacity
   * they take once found made.
   */
  #recovering = 0;
  /** Those questions in flight: {@link stop} waits for them before it looks at the lanes. */
  readonly #recoveries = new Set<Promise<void>>();
  #loop: Promise<void> | undefined;
  #wakeRequested = false;
  /** Which instances the next claim looks at: every one, or those woken since (src/webhooks/claim-targets.ts). */
  readonly #targets: ClaimTargets;
  #sleeper: (() => void) | undefined;

  constructor(options: DeliveryWorkerOptions) {
    this.#options = options;
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#pollMs = options.pollIntervalMs ?? 1000;
    this.#targets = new ClaimTargets(this.#pollMs);
    this.#staleMs = options.staleAfterMs ?? 2 * options.timeoutMs + 30_000;
    this.#concurrency = Math.max(1, options.concurrency ?? DEFAULT_WEBHOOK_CONCURRENCY);
    const window = Math.min(MAX_CHANNEL_DEPTH, Math.max(1, options.laneWindow ?? DEFAULT_LANE_WINDOW));
    // A lane batch of four windows keeps a wide window full: each record starts the next delivery until the batch
    // runs out (docs/decisions/0059-lane-record-groups.md).
    this.#laneBatch = Math.max(1, options.laneBatch ?? Math.max(DEFAULT_LANE_BATCH, 4 * window));
    this.#laneWindow = Math.min(this.#laneBatch, window);
    this.#places = new RequestPlaces(options.maxInFlight ?? DEFAULT_WEBHOOK_MAX_IN_FLIGHT);
    this.#retry = new RetryPolicy(options.scheduleMs, options.random);
    this.#recorder = {
      options,
      retry: this.#retry,
      workerId: this.id,
      staleMs: this.#staleMs,
      stopping: () => this.#stopping,
      // One statement for the records of every lane of a turn (docs/decisions/0081-record-statements-across-lanes.md).
      ...(options.turn === undefined && options.store.dialect === 'postgres'
        ? { together: new CrossLaneRecords(options.store.db) }
        : {}),
    };
    this.#laneContext = {
      options,
      recorder: this.#recorder,
      laneWindow: this.#laneWindow,
      places: this.#places,
      keptPlaces: () => this.#keptPlaces(),
    };
  }

  /** Attempts a delivery gets per round with the configured schedule. */
  get maxAttempts(): number {
    return this.#retry.maxAttempts;
  }

  /**
   * Epoch ms before which a claim counts as stale at time `now` of the claims' clock (default: now on it, the store's
   * clock in the services, `storeClock`).
   */
  staleBefore(now: number = this.dueNow()): number {
    return now - this.#staleMs;
  }

  /**
   * Now on the store's clock, epoch ms: the time a delivery queued or redelivered "due now" gets as its `run_at`,
   * which every node's claims judge due times on (docs/decisions/0005-outbox-and-delivery.md, "Due times").
   */
  dueNow(): number {
    return storeClockOf(this.#options)();
  }

  /** Number of lanes this process is sending on (each with up to `laneWindow` attempts in flight). */
  get inFlight(): number {
    return this.#lanes.size;
  }

  /**
   * Requests in flight now over all lanes, counted as the places their slots hold (a slot keeps its place while the
   * record of one request starts the next; at most `maxInFlight`).
   */
  get requestsInFlight(): number {
    return this.#places.taken;
  }

  /** The most requests in flight at once over all lanes (`WEBHOOK_MAX_IN_FLIGHT`). */
  get maxInFlight(): number {
    return this.#places.limit;
  }

  /** Starts claiming. Idempotent. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = false;
    this.#stop = new AbortController();
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
    if (instanceId === undefined) this.#targets.everyInstance();
    else if (
      endpointIds.length > 0 &&
      endpointIds.every((endpointId) => this.#lanes.has(`${instanceId}/${endpointId}`))
    )
      return;
    else this.#targets.woken(instanceId);
    this.#wakeRequested = true;
    const sleeper = this.#sleeper;
    this.#sleeper = undefined;
    sleeper?.();
  }

  /**
   * Stops claiming, then lets attempts in flight finish for up to `graceMs` (a lane batch starts no further attempt
   * and gives its unstarted deliveries back); claims still held after that are released so another process (or the
   * next start) retries them at once instead of after the stale timeout (docs/decisions/0023-operations.md: shutdown
   * within its budget). An attempt that finishes later does not change its row.
   */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#stopping = true;
    this.#stop.abort();
    this.wake();
    await this.#loop;
    await Promise.allSettled([...this.#recoveries]);
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
    this.#targets.everyInstance();
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
        // Waking from a whole poll interval's sleep, the next claim walks every instance (`ClaimTargets`).
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
    // A lane is claimed only with a place for its first request (docs/decisions/0089-lane-window-default.md); the
    // lanes of a claim whose commit lost its answer keep theirs while the store is asked.
    const free = Math.min(this.#lanesFree(), this.#places.free - this.#recovering);
    // The instances woken meanwhile stay noted: a lane's end frees capacity and wakes the worker.
    if (free <= 0) return [];
    const { store, clock, logger } = this.#options;
    const now = clock();
    // Stamped and judged stale, and due times judged, on the store's clock, shared by every node
    // (docs/decisions/0008-leases-and-fencing.md, "One clock"; docs/decisions/0005-outbox-and-delivery.md, "Due
    // times"): never this node's wall clock, which may run ahead of another's or behind it.
    const lockedAt = this.#options.storeClock?.() ?? now;
    // Retries come due and claims go stale without a wake: every instance is looked at once a poll interval (of
    // real time), also while wakes keep the worker from sleeping until its poll.
    const targets = this.#targets.take();
    if (targets === undefined) return [];
    const { instances } = targets;
    const claim: ClaimOptions = {
      workerId: this.id,
      now,
      dueAt: lockedAt,
      lockedAt,
      staleBefore: this.staleBefore(lockedAt),
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
      this.#targets.everyInstance();
      const unconfirmed = unconfirmedClaim(error);
      if (unconfirmed === undefined) logger.warn({ err: error }, 'claiming webhook deliveries failed');
      else this.#recover(unconfirmed, error);
      return [];
    }
    const batches = lanesOf(claimed);
    // Every free lane taken: more may be due than this claim could take. The next claim looks at the same
    // instances again, or everywhere after a claim over every instance.
    if (batches.size >= free) this.#targets.again(instances);
    return this.#launch(batches);
  }

  /**
   * Asks the store, beside the claim loop, whether the claim of `claimed`, whose commit lost its answer with `error`,
   * was made, and sends its lane batches when it was (`claimMadeAfterLostCommit`, src/webhooks/lost-claims.ts); their
   * lanes take capacity meanwhile. The claims go on: a commit still running on the server, or a store that does not
   * answer, holds up only this claim's deliveries.
   */
  #recover(claimed: ClaimedDelivery[], error: unknown): void {
    const batches = lanesOf(claimed);
    this.#recovering += batches.size;
    const recovery = claimMadeAfterLostCommit(
      this.#options,
      claimed,
      error,
      this.#staleMs / 2,
      this.#stop.signal,
    )
      .then((kept) => {
        this.#recovering -= batches.size;
        if (kept) this.#launch(batches);
        else if (this.#running) this.wake();
      })
      .finally(() => this.#recoveries.delete(recovery));
    this.#recoveries.add(recovery);
  }

  /**
   * Lanes this process may still claim: `WEBHOOK_CONCURRENCY` less the lanes sending and those of a claim whose commit
   * lost its answer (docs/decisions/0054-delivery-concurrency.md). Below 0 only while such a claim is asked about.
   */
  #lanesFree(): number {
    return this.#concurrency - this.#lanes.size - this.#recovering;
  }

  /**
   * Places a window must leave free (docs/decisions/0089-lane-window-default.md): one for each lane this process may
   * still claim, one for each lane of a claim whose commit lost its answer, which takes its place at once if the
   * store says the claim was made, and one for each lane batch ending without a place, whose lane is claimable next.
   */
  #keptPlaces(): number {
    return Math.max(0, this.#lanesFree()) + this.#recovering + runsWithoutPlaces(this.#lanes.values());
  }

  /** Starts a lane batch per lane of `batches` (from {@link lanesOf}); returns the runs started. */
  #launch(batches: Map<string, ClaimedDelivery[]>): LaneRun[] {
    const { logger } = this.#options;
    // Every head's place and lane first, then the windows: a lane opening its window takes only what the heads
    // left beyond the places kept for lanes still to claim. The claim took no more lanes than there were free places
    // (a claim whose commit lost its answer kept its lanes' places meanwhile, as `#recovering`); each run gives its
    // head's place back when the head's slot ends (src/webhooks/lane-run.ts).
    this.#places.hold(batches.size);
    const runs = [...batches].map(([lane, batch]) => {
      const run: LaneRun = { done: Promise.resolve(), pending: batch, attempted: 0, places: 1 };
      this.#lanes.set(lane, run);
      return { lane, batch, run };
    });
    // The places free for windows now, beyond those kept for lanes still to claim, shared fairly among the claim's
    // lanes by what each can use (docs/decisions/0090-window-places-shared.md).
    const shares = windowShares(
      runs.map(({ batch }) => Math.min(this.#laneWindow - 1, batch.length - 1)),
      this.#places.free - this.#keptPlaces(),
    );
    return runs.map(({ lane, batch, run }, index) => {
      const [first] = batch;
      run.done = runLane(this.#laneContext, run, shares[index] ?? 0)
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
      return run;
    });
  }
}
