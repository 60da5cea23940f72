import type { Transaction } from 'kysely';
import type { ClaimedDelivery } from '../store/delivery-claims.ts';
import {
  type AttemptOutcome,
  type FinishInput,
  type FinishResult,
  finishAndStartNext,
  finishAttemptIn,
} from '../store/delivery-finish.ts';
import { deliveredGroupInOneStatement } from '../store/delivery-group.ts';
import { nextAttemptOf } from '../store/delivery-next.ts';
import { isStoreUnavailableError, untilStoreAnswers } from '../store/faults.ts';
import type { Database } from '../store/schema.ts';
import type { RetryPolicy } from './backoff.ts';
import type { CrossLaneRecords } from './cross-lane-records.ts';
import type { SentAttempt } from './sending.ts';
import { type DeliveryWorkerOptions, storeClockOf } from './worker-options.ts';

/**
 * Whether a lane's delivery was started: `undefined` until decided. A lane decides its starts one after the other
 * in `sequence` order (docs/decisions/0050-lane-windows.md); each taken delivery holds the decision of the one taken
 * before it.
 */
export interface StartDecision {
  started: boolean | undefined;
}

/** A lane's next delivery taken to be started by a record, with the start decision before it and its own. */
export interface TakenDelivery {
  next: ClaimedDelivery;
  /** The decision about the delivery taken before this one (or the window's opening). */
  before: StartDecision;
  /** This delivery's own decision, set by the record that takes it. */
  own: StartDecision;
}

/** An answered attempt of a lane waiting for its record. */
export interface AnsweredAttempt {
  delivery: ClaimedDelivery;
  sent: SentAttempt;
  /** The lane's next delivery this record may start (only after a delivered attempt). */
  taken: TakenDelivery | undefined;
  /** Read when the record is written: true once the lane batch must start nothing more. */
  halted: () => boolean;
}

/** What the records of a worker need: a subset of its options and its state. */
export interface RecorderContext {
  options: Pick<DeliveryWorkerOptions, 'store' | 'turn' | 'clock' | 'storeClock' | 'logger' | 'onAttempt'>;
  retry: RetryPolicy;
  workerId: string;
  /**
   * A claim older than this on the claims' clock (`storeClock`) is stale (ms); records wait out a store outage for
   * half of it.
   */
  staleMs: number;
  /** True once the worker is stopping: nothing more is started. */
  stopping: () => boolean;
  /**
   * PostgreSQL without the turn's shared transaction: the worker's statement for the delivered records of all its
   * lanes answered in one turn (docs/decisions/0081-record-statements-across-lanes.md). Without it a lane writes
   * its group of two or more in a statement of its own, and a single record alone.
   */
  together?: CrossLaneRecords;
}

/** An answered attempt with what its record needs across tries. */
interface Waiting {
  answer: AnsweredAttempt;
  outcome: AttemptOutcome;
  /** An earlier try of this record offered to start its next delivery (it may have committed unanswered). */
  offered: boolean;
  resolve: (nextStarted: boolean) => void;
  reject: (error: unknown) => void;
}

/**
 * The records of one lane batch (docs/decisions/0059-lane-record-groups.md): the attempts answered while the lane's
 * previous records were being written are recorded together, in the order they were answered, and each may start
 * the lane's next delivery it took. Starts stay decided one after the other in `sequence` order: a record starts
 * its delivery only when the decision of the delivery taken before it was "started", which within a group is the
 * result of the record before it in the same transaction. On SQLite a group is one part of the turn's shared
 * transaction (docs/decisions/0051-turn-groups.md), so one commit starts as many of the lane's deliveries as
 * answers came in; elsewhere each record keeps a transaction of its own (one statement for a delivered attempt on
 * PostgreSQL), written one after the other without waiting for a turn of the event loop between them.
 */
export class LaneRecords {
  readonly #context: RecorderContext;
  readonly #opened: Promise<unknown>;
  /** What a group weighs in the turn's shared transaction: the lane's window, the most answers that can wait. */
  readonly #weight: number;
  #waiting: Waiting[] = [];
  #writing = false;

  /**
   * `opened` settles once the lane's window was opened (its first deliveries started together,
   * docs/decisions/0050-lane-windows.md): until then no record is written, so every decision a group reads from
   * outside itself is known. `window`: the lane's requests in flight at most (a group's weight in the turn's
   * shared transaction).
   */
  constructor(context: RecorderContext, opened: Promise<unknown>, window = 1) {
    this.#context = context;
    this.#opened = opened;
    this.#weight = Math.max(1, window);
  }

  /**
   * Records `answer` with the lane's other answers of the same group. Its taken delivery's decision (`own`) is set
   * before the promise settles: started or not, and not started on an error.
   * @returns whether the taken delivery was started.
   * @throws the store's error (after waiting out an outage for half the stale timeout); the attempt is then left
   *   open, and its claim in place until it goes stale or the node registry frees it.
   */
  add(answer: AnsweredAttempt): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#waiting.push({ answer, outcome: this.#outcomeOf(answer), offered: false, resolve, reject });
      if (!this.#writing) void this.#pump();
    });
  }

  /**
   * The outcome an attempt's record applies: delivered, a retry at its time, failed, or gone (a 410). Due times are
   * set on the store's clock, which every node's claims judge them on (docs/decisions/0005-outbox-and-delivery.md,
   * "Due times"): set and judged on the nodes' own wall clocks, a retry was sent early by a node running ahead of
   * the one that set it, and late by one running behind.
   */
  #outcomeOf({ delivery, sent }: AnsweredAttempt): AttemptOutcome {
    if (sent.record.error === null) return { kind: 'delivered' };
    const now = storeClockOf(this.#context.options)();
    if (sent.gone)
      return {
        kind: 'gone',
        reason: 'receiver answered 410 Gone',
        url: delivery.url,
        urlSealed: delivery.urlSealed,
        runAt: now,
      };
    // `attempts` was counted when this attempt was claimed: it is this attempt's number in the round.
    const runAt = this.#context.retry.nextRunAt({
      attemptsMade: delivery.attempts,
      maxAttempts: delivery.maxAttempts,
      now,
      retryAfter: sent.retryAfter,
    });
    return runAt === null ? { kind: 'failed' } : { kind: 'retry', runAt };
  }

  /** Writes the waiting records group after group, one group at a time. */
  async #pump(): Promise<void> {
    this.#writing = true;
    try {
      await this.#opened.catch(() => undefined);
      while (this.#waiting.length > 0) await this.#writeGroup();
    } finally {
      this.#writing = false;
    }
  }

  /** Writes one group and settles its callers; never throws. */
  async #writeGroup(): Promise<void> {
    const { turn } = this.#context.options;
    if (turn === undefined) {
      await this.#writeOnPool(this.#waiting.splice(0));
      return;
    }
    /** The group, taken from the waiting records when the turn's transaction first runs it. */
    let group: Waiting[] | undefined;
    try {
      // The group holds every answer of the turn; a try after a rolled-back shared transaction, or after a store
      // outage, writes the same records again. It weighs a whole window: that many answers can be waiting.
      const results = await this.#untilStoreAnswers(() =>
        turn.run((trx) => {
          group ??= this.#waiting.splice(0);
          return this.#recordIn(trx, group);
        }, this.#weight),
      );
      for (const [index, waiting] of (group ?? []).entries()) this.#settle(waiting, results[index]);
    } catch (error) {
      const failed = group ?? this.#waiting.splice(0);
      if (failed.length > 1 && !isStoreUnavailableError(error)) {
        // A record that cannot be written fails alone, as it did in a part of its own (docs/decisions/0051-turn-groups.md):
        // the others are written one by one after it, and nothing starts after a record that failed.
        for (const waiting of failed) {
          try {
            const [result] = await turn.run((trx) => this.#recordIn(trx, [waiting]));
            this.#settle(waiting, result);
          } catch (alone) {
            this.#fail(waiting, alone);
          }
        }
        return;
      }
      for (const waiting of failed) this.#fail(waiting, error);
    }
  }

  /**
   * Writes a group on the pool (PostgreSQL): in one statement when it can (src/store/delivery-group.ts), else one
   * record after the other, each caller settled as soon as its own record is written, so a started delivery goes
   * out at once. A record that cannot be written fails alone, and nothing starts after it.
   */
  async #writeOnPool(group: readonly Waiting[]): Promise<void> {
    const { store } = this.#context.options;
    const together = await this.#recordTogether(group);
    if (together !== undefined) {
      for (const [index, waiting] of group.entries()) this.#settle(waiting, together[index]);
      return;
    }
    // A group of one, one with a failed attempt, or after a group statement that failed (whose answer was lost:
    // each record that offered a start then asks whether its first try made it). The group waits out a store
    // outage once, up to half the stale timeout from its start; a store still unreachable then fails the records
    // not yet written at once.
    const { clock } = this.#context.options;
    const giveUpAt = clock() + this.#context.staleMs / 2;
    let unreachable: unknown;
    for (const waiting of group) {
      if (unreachable !== undefined) {
        this.#fail(waiting, unreachable);
        continue;
      }
      try {
        const result = await untilStoreAnswers(
          () => finishAndStartNext(store.db, this.#inputOf(waiting, this.#nextOf(waiting)), store.dialect),
          clock,
          giveUpAt,
        );
        this.#decide(waiting, result);
        this.#settle(waiting, result);
      } catch (error) {
        if (isStoreUnavailableError(error)) unreachable = error;
        this.#fail(waiting, error);
      }
    }
  }

  /** Reports a written record and gives its caller whether its taken delivery was started. */
  #settle(waiting: Waiting, result: FinishResult | undefined): void {
    this.#report(waiting, result);
    waiting.resolve(result?.nextStarted ?? false);
  }

  /** A record that could not be written: its taken delivery is not started, and its caller gets `error`. */
  #fail(waiting: Waiting, error: unknown): void {
    if (waiting.answer.taken !== undefined) waiting.answer.taken.own.started = false;
    waiting.reject(error);
  }

  /**
   * Writes a group of delivered records in one statement on PostgreSQL (src/store/delivery-group.ts), each record's
   * start decided in it by the same rule, and sets each decision: with the other lanes' records of the turn when the
   * worker shares them (`together`), else in a statement of the lane's own.
   * @returns the results, or undefined when the group is to be written one record at a time: a group of one without
   *   `together`, one holding a failed attempt, or a statement that failed (an unreachable store leaves its outcome
   *   unknown: every record that offered to start its next delivery then asks whether it did).
   */
  async #recordTogether(group: readonly Waiting[]): Promise<FinishResult[] | undefined> {
    const { store } = this.#context.options;
    const { together } = this.#context;
    if (
      store.dialect !== 'postgres' ||
      group.length < (together === undefined ? 2 : 1) ||
      group.some((waiting) => waiting.outcome.kind !== 'delivered' || waiting.offered)
    )
      return undefined;
    // Each record's next delivery before the decisions within the group are known: the statement applies the rule
    // that a start follows only a start.
    const records = group.map((waiting) => ({
      input: this.#inputOf(waiting, this.#nextOf(waiting, true)),
      takes: waiting.answer.taken !== undefined,
    }));
    const now = records[0]?.input.now;
    for (const record of records) record.input.now = now ?? record.input.now;
    try {
      const results =
        together === undefined
          ? await deliveredGroupInOneStatement(store.db, records)
          : await together.write(records);
      for (const [index, waiting] of group.entries()) {
        const result = results[index];
        if (result !== undefined) this.#decide(waiting, result);
      }
      return results;
    } catch {
      // Nothing of it was written, or (the store could not be reached) whether it was is unknown: written again one
      // record at a time, where each record that offered a start asks whether it was made.
      return undefined;
    }
  }

  /**
   * The group's records in `trx`, in order. Each decision is set as its statement ran, so the record after it in
   * the same transaction reads it; a transaction rolled back is written again (or fails every record of it, which
   * then sets each decision to "not started").
   */
  async #recordIn(trx: Transaction<Database>, group: readonly Waiting[]): Promise<FinishResult[]> {
    const results: FinishResult[] = [];
    for (const waiting of group) {
      const result = await finishAttemptIn(trx, this.#inputOf(waiting, this.#nextOf(waiting)));
      this.#decide(waiting, result);
      results.push(result);
    }
    return results;
  }

  /**
   * The delivery `waiting` may start: its taken one, when the decision about the delivery taken before it was
   * "started" (set by an earlier group, the window's opening, or the record before it in this group) and the lane
   * batch is not halted. `inStatement`: for a group statement, which decides the starts within the group itself,
   * an undecided decision (a record before it in the group) counts, and only one known "not started" refuses.
   */
  #nextOf(waiting: Waiting, inStatement = false): ClaimedDelivery | undefined {
    const { taken, halted } = waiting.answer;
    if (taken === undefined || halted()) return undefined;
    const before = taken.before.started;
    return (inStatement ? before !== false : before === true) ? taken.next : undefined;
  }

  /** Sets the taken delivery's decision from `result`. */
  #decide(waiting: Waiting, result: FinishResult): void {
    const { taken } = waiting.answer;
    if (taken !== undefined) taken.own.started = result.nextStarted;
  }

  /**
   * After a record committed: calls `onAttempt`, and logs a claim taken over (`result.applied` false: the delivery
   * was left to the claim holding it, and an attempt that claim marked abandoned kept the mark,
   * docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md).
   */
  #report(waiting: Waiting, result: FinishResult | undefined): void {
    const { delivery, sent } = waiting.answer;
    const { onAttempt, logger } = this.#context.options;
    try {
      onAttempt?.(waiting.outcome.kind, sent.record.durationMs, delivery.instanceId);
      if (result !== undefined && !result.applied) {
        logger.info(
          { eventId: delivery.eventId },
          'webhook claim was taken over before the attempt finished; its outcome was not applied',
        );
      }
    } catch {
      // `onAttempt` must not throw (src/webhooks/worker-options.ts); one that does must not unsettle the records.
    }
  }

  /**
   * The record's input at this try. Starting `next` is decided at each try: a try after a store outage must not
   * start the next delivery of a claim grown old; a try after one that offered to start it still asks whether that
   * one did (it may have committed unanswered).
   */
  #inputOf(waiting: Waiting, next: ClaimedDelivery | undefined): FinishInput {
    const { delivery, sent } = waiting.answer;
    const { clock } = this.#context.options;
    const now = clock();
    const start =
      next !== undefined &&
      waiting.outcome.kind === 'delivered' &&
      !this.#context.stopping() &&
      storeClockOf(this.#context.options)() - next.lockedAt < this.#context.staleMs / 2;
    // A try after one that offered to start the taken delivery asks whether it did, even when it would no longer
    // start it (the lane halted or the claim grew old meanwhile); but not once the start before it is known not
    // made: the lane then gives its later deliveries back, and none may be reported started
    // (docs/decisions/0050-lane-windows.md).
    const taken = waiting.answer.taken;
    const check = !start && waiting.offered && taken !== undefined && taken.before.started !== false;
    const offeredBefore = waiting.offered;
    waiting.offered ||= start;
    return {
      eventId: delivery.eventId,
      endpointId: delivery.endpointId,
      instanceId: delivery.instanceId,
      attemptId: delivery.attemptId,
      workerId: this.#context.workerId,
      lockedAt: delivery.lockedAt,
      attempt: sent.record,
      outcome: waiting.outcome,
      now: new Date(now).toISOString(),
      ...(start ? { next: nextAttemptOf(next) } : check ? { next: nextAttemptOf(taken.next) } : {}),
      ...(check ? { nextCheckOnly: true } : {}),
      ...(start && offeredBefore ? { offeredBefore: true } : {}),
    };
  }

  #untilStoreAnswers<T>(work: () => Promise<T>): Promise<T> {
    const { clock } = this.#context.options;
    return untilStoreAnswers(work, clock, clock() + this.#context.staleMs / 2);
  }
}
