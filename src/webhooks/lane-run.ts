import { OutboundChannel } from '../net/outbound-channel.ts';
import { returnUnstarted } from '../store/deliveries.ts';
import type { ClaimedDelivery } from '../store/delivery-claims.ts';
import { nextAttemptOf, startDeliveries, startedBefore } from '../store/delivery-next.ts';
import { untilStoreAnswers } from '../store/faults.ts';
import { LaneRecords, type RecorderContext, type StartDecision, type TakenDelivery } from './lane-records.ts';
import type { RequestPlaces } from './request-places.ts';
import { sendAttempt } from './sending.ts';
import { type DeliveryWorkerOptions, storeClockOf } from './worker-options.ts';

/** A lane batch in flight: its promise and the claimed deliveries whose attempts have not ended yet. */
export interface LaneRun {
  done: Promise<void>;
  /** Deliveries of the batch not yet finished, in `sequence` order (in flight, then not started). */
  pending: ClaimedDelivery[];
  /** Attempts the batch made. */
  attempted: number;
  /**
   * Places of the process's {@link RequestPlaces} the batch holds now: its head's from the launch, and its window's
   * while their slots run. 0 once every slot has ended, while the batch gives back what it did not start.
   */
  places: number;
}

/**
 * The lane batches of `runs` that hold no place (every slot ended, their unstarted deliveries being given back): each
 * leaves a lane to claim soon, whose first request needs a place that no window may take meanwhile
 * (docs/decisions/0089-lane-window-default.md).
 */
export function runsWithoutPlaces(runs: Iterable<LaneRun>): number {
  let count = 0;
  for (const run of runs) if (run.places <= 0) count += 1;
  return count;
}

/** What a lane batch's run needs from its worker (src/webhooks/worker.ts). */
export interface LaneRunContext {
  /** The worker's options: the store, the clock, the logger and what an attempt is sent with. */
  options: DeliveryWorkerOptions;
  /** What the lane's records need, with the worker's id, its stale timeout (ms) and whether it is stopping. */
  recorder: RecorderContext;
  /** Requests in flight on the lane at once (at least 1, at most the lane batch). */
  laneWindow: number;
  /**
   * The process's places for requests in flight (src/webhooks/request-places.ts): the head's was taken by the
   * worker when it launched the batch, and is given back here when the head's slot ends; the rest of the window
   * opens only as far as places are free beyond {@link keptPlaces}.
   */
  places: RequestPlaces;
  /**
   * Places a window must leave free: one for each lane the process may still claim and for each lane of a claim whose
   * commit lost its answer (docs/decisions/0089-lane-window-default.md).
   */
  keptPlaces: () => number;
}

/**
 * Sends a lane batch (docs/decisions/0048-lane-batches.md) with up to `laneWindow` requests in flight
 * (docs/decisions/0050-lane-windows.md), as far as the process's places allow
 * (docs/decisions/0089-lane-window-default.md) and no further than `share` places beyond the head's (a whole number
 * ≥ 0: the lane's share of its claim's places for windows, docs/decisions/0090-window-places-shared.md). The head was
 * started by the claim; with a window the next deliveries are started together at once, and from then on each
 * delivered attempt's record starts the lane's next unstarted delivery in the same transaction; the records of
 * attempts answered together are written together (docs/decisions/0059-lane-record-groups.md). Starts are decided
 * one after the other in `sequence` order: a delivery is started only once the one before it was, so a lane never
 * has a later delivery started and an earlier one given back. Nothing more is started once an attempt was not
 * delivered, a start was refused (the claim lost or the lane changed), the worker is stopping or the claim is older
 * than half the stale timeout (asked again at each try of the opening through a failing store); the deliveries not
 * started are given back at once, unlocked and ready for the next claim, when the requests in flight have ended.
 * @throws the first error met recording an attempt (after the rest was given back).
 */
export async function runLane(context: LaneRunContext, run: LaneRun, share: number): Promise<void> {
  const { options, recorder, laneWindow, places, keptPlaces } = context;
  const { workerId, staleMs } = recorder;
  const untilAnswered = <T>(work: () => Promise<T>): Promise<T> =>
    untilStoreAnswers(work, options.clock, options.clock() + staleMs / 2);
  /** Gives back `count` places the batch held. */
  const give = (count: number) => {
    places.give(count);
    run.places -= count;
  };
  const [head, ...queue] = run.pending;
  if (head === undefined) {
    give(1);
    return;
  }
  const { store } = options;
  // The window opens to its share of the places for windows, as far as the process has places for more requests
  // beyond one for each lane it may still claim (the head holds its own); each place is given back when its slot
  // ends, or at once for a delivery that is not started.
  const opening = queue.splice(0, places.take(Math.min(laneWindow - 1, queue.length, share), keptPlaces()));
  run.places += opening.length;
  // A window's requests go out pipelined on one connection, so they reach the receiver in the order they were
  // started (docs/decisions/0058-pipelined-lanes.md).
  const channel = opening.length > 0 ? new OutboundChannel(opening.length + 1) : undefined;
  /** Deliveries taken from the queue but not started: given back with the queue's rest at the end. */
  const notStarted: ClaimedDelivery[] = [];
  let halted = false;
  /** The start decision of the delivery taken last: the head was started by the claim. */
  let lastStart: StartDecision = { started: true };
  const mayStart = (delivery: ClaimedDelivery) =>
    !halted && !recorder.stopping() && storeClockOf(options)() - delivery.lockedAt < staleMs / 2;
  const finished = (delivery: ClaimedDelivery) => {
    const index = run.pending.indexOf(delivery);
    if (index >= 0) run.pending.splice(index, 1);
  };
  /** Takes the queue's next delivery, chained after the decision of the one taken before it. */
  const take = (): TakenDelivery | undefined => {
    const next = queue.shift();
    if (next === undefined) return undefined;
    const taken: TakenDelivery = { next, before: lastStart, own: { started: undefined } };
    lastStart = taken.own;
    return taken;
  };
  let opened: () => void = () => undefined;
  const records = new LaneRecords(
    recorder,
    new Promise<void>((resolve) => {
      opened = resolve;
    }),
    opening.length + 1,
  );
  /** Sends `first`, then each next delivery its records start, until one is not started. */
  const slot = async (first: ClaimedDelivery): Promise<void> => {
    let delivery: ClaimedDelivery | undefined = first;
    while (delivery !== undefined) {
      run.attempted += 1;
      // The request ends before its claim could go stale, as one request at a time does (started within half the
      // stale timeout, it ends within one time-out more): a request waiting on the channel behind slow answers is cut
      // then, instead of being claimed again as stale and sent a second time while it is still out
      // (docs/decisions/0058-pipelined-lanes.md).
      const endWithinMs = delivery.lockedAt + staleMs / 2 + options.timeoutMs - storeClockOf(options)();
      const sent = await sendAttempt(options, delivery, channel, endWithinMs);
      // Taken in the order the answers come, which is the order their records are written in.
      const taken: TakenDelivery | undefined =
        sent.record.error === null && mayStart(delivery) ? take() : undefined;
      if (sent.record.error !== null) halted = true;
      let nextStarted = false;
      try {
        nextStarted = await records.add({ delivery, sent, taken, halted: () => halted });
      } finally {
        if (taken !== undefined && !nextStarted) {
          halted = true;
          notStarted.push(taken.next);
        }
      }
      finished(delivery);
      delivery = nextStarted ? taken?.next : undefined;
    }
  };

  const first = slot(head).finally(() => give(1));
  // Handled by the `allSettled` below; until then a rejection must not count as unhandled.
  first.catch(() => undefined);
  const slots = [first];
  if (opening.length > 0) {
    const decision: StartDecision = { started: undefined };
    lastStart = decision;
    let started = 0;
    let unknown = false;
    try {
      if (mayStart(head)) {
        // A try after one whose answer was lost first waits for that one's commit (`startDeliveries`'s `again`).
        // A try again starts nothing more once the worker stops or the claim grew old while the store was waited
        // out: it only counts what a try whose answer was lost started, which is sent.
        let tries = 0;
        started = await untilAnswered(() => {
          const again = tries++ > 0;
          return again && !mayStart(head)
            ? startedBefore(store.db, opening.map(nextAttemptOf), store.dialect)
            : startDeliveries(
                store.db,
                opening.map(nextAttemptOf),
                workerId,
                options.clock(),
                store.dialect,
                again,
              );
        });
      }
    } catch (error) {
      // Whether the transaction committed is unknown: none of them is sent, and they stay claimed, as after a
      // record that could not be written, until the node registry or the stale timeout frees them (an attempt
      // row left open is then marked abandoned).
      unknown = true;
      options.logger.warn({ err: error }, 'starting webhook deliveries failed');
    }
    const allStarted = !unknown && started === opening.length;
    decision.started = allStarted;
    if (!allStarted) halted = true;
    const unsent = unknown ? opening.splice(0) : opening.splice(started);
    if (!unknown) notStarted.push(...unsent);
    give(unsent.length);
    slots.push(...opening.map((delivery) => slot(delivery).finally(() => give(1))));
  }
  // The lane's records are written from here on: every start decision they read from outside is known.
  opened();

  const ended = await Promise.allSettled(slots);
  channel?.close();
  const unstarted = [...notStarted, ...queue.splice(0)];
  if (unstarted.length > 0) {
    for (const delivery of unstarted) finished(delivery);
    await untilAnswered(() => returnUnstarted(store.db, workerId, unstarted)).catch((error: unknown) =>
      options.logger.warn({ err: error }, 'giving back unstarted webhook deliveries failed'),
    );
  }
  const failure = ended.find((result) => result.status === 'rejected');
  if (failure !== undefined) throw failure.reason;
}

/**
 * `claimed` (in `sequence` order) as lane batches, by lane (`<instanceId>/<endpointId>`): a delivery is an event to
 * one endpoint (docs/decisions/0035-webhook-endpoints.md), and each batch keeps `sequence` order.
 */
export function lanesOf(claimed: readonly ClaimedDelivery[]): Map<string, ClaimedDelivery[]> {
  const batches = new Map<string, ClaimedDelivery[]>();
  for (const delivery of claimed) {
    const lane = `${delivery.instanceId}/${delivery.endpointId}`;
    const batch = batches.get(lane);
    if (batch === undefined) batches.set(lane, [delivery]);
    else batch.push(delivery);
  }
  return batches;
}
