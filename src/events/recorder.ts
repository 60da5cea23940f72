import type { FastifyBaseLogger } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import {
  isStoreUnavailableError,
  notSentBehind,
  outcomeUnknown,
  untilStoreAnswers,
} from '../store/faults.ts';
import type { Database } from '../store/schema.ts';
import type { TurnTransactions } from '../store/turn-transactions.ts';
import { runDeferredWrites } from '../store/write-groups.ts';

/**
 * A subscriber to engine events that writes inside the recorder's transaction: the instance state, the message
 * store and the webhook outbox are projections, so a message row and its outbox row commit together
 * (docs/decisions/0024-engines-and-data-flow.md, docs/decisions/0005-outbox-and-delivery.md).
 */
export interface EventProjection {
  /** A short name for logs. */
  readonly name: string;
  /** Applies `event` of instance `instanceId`; throwing rolls the whole event back. */
  apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void>;
  /**
   * Optional: called once for each instance's batch in a transaction (several instances' batches may share one,
   * docs/decisions/0051-turn-groups.md, each applied whole before the next), before its events are applied, with
   * the batch's events in order (not the derived ones, nor those a {@link RecordedWrite} returns), to read or write
   * for all of them at once (the send queue
   * marks the batch's jobs sent in one statement). Throwing rolls the batch back.
   */
  prepare?(trx: Transaction<Database>, instanceId: string, events: readonly EngineEvent[]): Promise<void>;
  /**
   * Optional: called once for each instance's batch, after every event of it (derived ones included) was applied
   * and before the next batch or the commit, to write what `apply` buffered (multi-row inserts instead of one
   * statement per event). It may put writes off to the batch's write group (`deferWrites` in
   * src/store/write-groups.ts): a later flush's group takes them along, and the recorder runs what is left once
   * every flush ran. Throwing rolls the batch back.
   */
  flush?(trx: Transaction<Database>, instanceId: string): Promise<void>;
  /** Called after the transaction committed (e.g. to wake the delivery worker). Must not throw. */
  afterCommit?(instanceId: string, event: EngineEvent): void;
  /**
   * Optional: called when the recording of `event` was given up ({@link EventRecorder.unrecorded}: the session that
   * emitted it stopped retrying, src/sessions/record-retry.ts), so nothing of it is in the store, although what it
   * reports may still hold in this process (a login whose connection stays open: the send queue drains it,
   * docs/decisions/0009-sends-as-jobs.md). Must not throw.
   */
  unrecorded?(instanceId: string, event: EngineEvent): void;
  /**
   * Optional: events that follow from `event`, found in the same transaction after every projection applied it
   * (a send's `MessageStatus` once its `message` is recorded). Each is applied by every projection in the same
   * transaction, right after `event`, and gets the after-commit hooks too.
   */
  derive?(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<EngineEvent[]>;
  /**
   * Optional: whether transaction `trx`, whose `commit` failed with its outcome unknown (the connection to a remote
   * store broke as it answered, `outcomeUnknown` in src/store/faults.ts), was committed, read through `db` from a row
   * this projection wrote in it; undefined when it wrote none to tell by. @throws the store's error.
   */
  keptAfterLostCommit?(db: Kysely<Database>, trx: Transaction<Database>): Promise<boolean | undefined>;
}

/** How long a batch whose commit answer was lost waits for the store to say whether it kept it, ms. */
export const LOST_COMMIT_CHECK_MS = 30_000;

/** Most events one transaction applies for one instance (group commit); bounds transaction length and lock time. */
export const MAX_BATCH = 256;

/** Options of an {@link EventRecorder}. */
export interface EventRecorderOptions {
  /**
   * The store's shared transaction of each event-loop turn: the batches of several instances ready in the same turn
   * are applied in it, each with its own prepare, apply and flush, and pay one commit between them. On SQLite the
   * services pass the turn's transaction every writer shares (docs/decisions/0051-turn-groups.md), whose one
   * connection runs transactions one at a time anyway; on PostgreSQL the recorder's own (`recorderTurns`,
   * src/store/recorder-turns.ts, docs/decisions/0082-recorder-turns-on-postgres.md), in which the batches also take
   * their sequence numbers and write their rows in one statement each. Without it each batch has a transaction of
   * its own.
   */
  turn?: TurnTransactions;
}

/**
 * A write that causes events (docs/decisions/0076-status-with-its-write.md): run in the recorder's transaction, in
 * order with the instance's other events, it returns what the caller gets back (`result`) and the events its
 * outcome causes (`events`, perhaps none), which the same transaction records. It may run a second time, in a
 * transaction of its own, when the one it ran in rolled back (a turn's shared one, or a batch the recorder tries
 * again one item at a time): what it wrote then is gone. Its events are not given to the projections' `prepare`.
 */
export type RecordedWrite<T> = (trx: Transaction<Database>) => Promise<{ result: T; events: EngineEvent[] }>;

interface Pending {
  /** The event to record, or a write whose events are recorded (its result given to `resolve`). */
  event: EngineEvent | RecordedWrite<unknown>;
  resolve: (result?: unknown) => void;
  reject: (error: unknown) => void;
}

/** What one item of a batch applied: its events (its own, then those derived from them) and a write's result. */
interface Applied {
  events: EngineEvent[];
  result: unknown;
}

interface InstanceQueue {
  items: Pending[];
  running: Promise<void>;
}

/**
 * Records engine events over every projection, events of one instance strictly in emission order (so
 * `sequence` follows the platform's order, docs/decisions/0005-outbox-and-delivery.md). Group commit: while one
 * transaction of an instance runs, later events of that instance wait and the next transaction applies all of them
 * (up to {@link MAX_BATCH}) in order, so a busy instance pays one commit per batch instead of one per event; each
 * caller's promise settles only after the transaction holding its event committed
 * (docs/decisions/0024-engines-and-data-flow.md). With `turn`, the batches of several instances ready in the same
 * turn share one transaction (docs/decisions/0051-turn-groups.md); each instance's events stay in order.
 * Projections may read ahead for the whole batch (`prepare`) and buffer their rows to write them together at its
 * end (`flush`), so a batch costs a few statements, not a few per event. A failing batch is retried one event per
 * transaction of its own, so one bad event fails alone; an event failing with the store unreachable fails the
 * instance's events behind it untried, so none is applied before it (docs/decisions/0011-store-faults.md).
 */
export class EventRecorder {
  readonly #db: Kysely<Database>;
  readonly #projections: EventProjection[];
  readonly #logger: FastifyBaseLogger;
  /** Waiting events per instance; removed when the queue drains so idle instances cost nothing. */
  readonly #queues = new Map<string, InstanceQueue>();
  /** The turn's shared transaction, when batches share one (`EventRecorderOptions.turn`). */
  readonly #turn: TurnTransactions | undefined;

  constructor(
    db: Kysely<Database>,
    projections: EventProjection[],
    logger: FastifyBaseLogger,
    options: EventRecorderOptions = {},
  ) {
    this.#db = db;
    this.#projections = projections;
    this.#logger = logger;
    this.#turn = options.turn;
  }

  /** Adds a projection (applied after the existing ones). */
  use(projection: EventProjection): void {
    this.#projections.push(projection);
  }

  /**
   * Records one event after every earlier event of the same instance; resolves once it is committed.
   * @throws the projection's error when the event's transaction fails (nothing of the event is kept).
   */
  record(instanceId: string, event: EngineEvent): Promise<void> {
    return new Promise<void>((resolve, reject) =>
      this.#enqueue(instanceId, { event, resolve: () => resolve(), reject }),
    );
  }

  /**
   * Runs `write` after every earlier event of the same instance, in a transaction that records the events it returns
   * (docs/decisions/0076-status-with-its-write.md): a store change and the events it causes commit together or not
   * at all, so no crash between them loses the events, and a write that finds nothing to change records none.
   * @returns the write's `result`, once committed.
   * @throws the write's or a projection's error (nothing of it is kept), or the store's.
   */
  recordWith<T>(instanceId: string, write: RecordedWrite<T>): Promise<T> {
    return new Promise<T>((resolve, reject) =>
      // The queue holds writes of several result types; this one's result is what its own `write` returned.
      this.#enqueue(instanceId, { event: write, resolve: resolve as (result?: unknown) => void, reject }),
    );
  }

  #enqueue(instanceId: string, item: Pending): void {
    const queue = this.#queues.get(instanceId);
    if (queue) {
      queue.items.push(item);
      return;
    }
    const created: InstanceQueue = { items: [item], running: Promise.resolve() };
    this.#queues.set(instanceId, created);
    created.running = this.#run(instanceId, created);
  }

  /**
   * Tells every projection that the recording of `event` of instance `instanceId` was given up
   * ({@link EventProjection.unrecorded}): the caller that records it (src/sessions/engine-session.ts) stopped
   * retrying, on a permanent store error, an unknown one tried too often, a released session or shutdown. A
   * projection's throw is logged. Never throws.
   */
  unrecorded(instanceId: string, event: EngineEvent): void {
    for (const projection of this.#projections) {
      try {
        projection.unrecorded?.(instanceId, event);
      } catch (error) {
        this.#logger.error({ err: error, projection: projection.name }, 'projection unrecorded failed');
      }
    }
  }

  /** Resolves when every event recorded so far has been applied (shutdown). */
  async drain(): Promise<void> {
    while (this.#queues.size > 0) await Promise.all([...this.#queues.values()].map((q) => q.running));
  }

  async #run(instanceId: string, queue: InstanceQueue): Promise<void> {
    // Let the callers of this tick join the first batch.
    await Promise.resolve();
    while (queue.items.length > 0) {
      const batch = queue.items.splice(0, MAX_BATCH);
      try {
        await this.#apply(instanceId, batch);
      } catch (error) {
        if (batch.length === 1) {
          batch[0]?.reject(error);
          if (isStoreUnavailableError(error)) this.#failBehind(queue.items, error);
          continue;
        }
        for (const [index, item] of batch.entries()) {
          try {
            // In a transaction of its own: a bad event must not roll back other instances' work again.
            await this.#apply(instanceId, [item], true);
          } catch (single) {
            item.reject(single);
            if (!isStoreUnavailableError(single)) continue;
            this.#failBehind(batch.slice(index + 1), single);
            this.#failBehind(queue.items, single);
            break;
          }
        }
      }
    }
    this.#queues.delete(instanceId);
  }

  /**
   * Fails `items` untried (and empties `items` when it is the instance's queue) after an earlier item of their
   * instance failed with `cause`, a store that cannot be reached: each caller retries as for a failure of its own
   * (docs/decisions/0011-store-faults.md), a session's recordings in the order they were emitted
   * (src/sessions/record-line.ts). Tried now, on a store that answers again at once (another connection than the
   * one that broke, a busy file freed), an item would commit before the earlier one, which its caller tries again
   * only after a wait: a receipt or deletion applied before the message it names finds no row and is lost.
   */
  #failBehind(items: Pending[], cause: unknown): void {
    for (const item of items.splice(0)) item.reject(notSentBehind(cause));
  }

  /**
   * Applies `batch` in one transaction (the turn's shared one with `turn`, unless `alone`), then runs the
   * after-commit hooks and settles each caller. @throws the transaction's error (nothing of the batch is kept).
   */
  async #apply(instanceId: string, batch: Pending[], alone = false): Promise<void> {
    const own = this.#turn === undefined || alone;
    /** The last run of `work` that went to its end (its transaction then met the `commit`). */
    let finished: { trx: Transaction<Database>; applied: Applied[] } | undefined;
    const work = async (trx: Transaction<Database>) => {
      finished = undefined;
      const applied = await this.#applyIn(trx, instanceId, batch, own);
      finished = { trx, applied };
      return applied;
    };
    let applied: Applied[];
    try {
      applied = await (own ? this.#db.transaction().execute(work) : this.#turn.run(work, batch.length));
    } catch (error) {
      // A commit whose answer was lost may have kept the batch: recording it again would write its events twice
      // (docs/decisions/0024-engines-and-data-flow.md), so the store is asked first.
      if (finished === undefined || !outcomeUnknown(error) || !(await this.#kept(finished.trx))) throw error;
      applied = finished.applied;
    }
    this.#settle(instanceId, batch, applied);
  }

  /**
   * Whether transaction `trx`, whose commit answer was lost, was committed: the first projection that wrote a row to
   * tell by answers, once the store does (waited for at most {@link LOST_COMMIT_CHECK_MS}); false when none did.
   * @throws the store's error when it does not answer in time.
   */
  async #kept(trx: Transaction<Database>): Promise<boolean> {
    for (const projection of this.#projections) {
      if (!projection.keptAfterLostCommit) continue;
      const check = projection.keptAfterLostCommit.bind(projection);
      const kept = await untilStoreAnswers(
        () => check(this.#db, trx),
        Date.now,
        Date.now() + LOST_COMMIT_CHECK_MS,
      );
      if (kept !== undefined) return kept;
    }
    return false;
  }

  /**
   * Applies one instance's batch in `trx`: every projection's prepare, each event and the events derived from it,
   * then every projection's flush. With `own` (the batch has `trx` to itself) the batch's write group is the
   * transaction's last statement, and the commit may go out behind it (docs/decisions/0063-pipelined-commit.md).
   * @returns what each item of `batch` applied: its events (its own first, then those derived from them), and a
   *   write's result.
   */
  async #applyIn(
    trx: Transaction<Database>,
    instanceId: string,
    batch: Pending[],
    own: boolean,
  ): Promise<Applied[]> {
    const applied: Applied[] = [];
    const batchEvents = batch.flatMap((item) => (typeof item.event === 'function' ? [] : [item.event]));
    for (const projection of this.#projections) await projection.prepare?.(trx, instanceId, batchEvents);
    for (const item of batch) {
      let result: unknown;
      let events: EngineEvent[];
      if (typeof item.event === 'function') {
        // A write's events are known once it ran; none of them is a batch event the prepare step needs (the send
        // queue's prepare looks at own `message` events only).
        const written = await item.event(trx);
        result = written.result;
        events = [...written.events];
      } else {
        events = [item.event];
      }
      for (let i = 0; i < events.length; i++) {
        const current = events[i] as EngineEvent;
        for (const projection of this.#projections) await projection.apply(trx, instanceId, current);
        for (const projection of this.#projections) {
          if (projection.derive) events.push(...(await projection.derive(trx, instanceId, current)));
        }
      }
      applied.push({ events, result });
    }
    for (const projection of this.#projections) await projection.flush?.(trx, instanceId);
    // Writes a flush put off to the batch's write group and no later flush took along (docs/decisions/0056-write-groups.md).
    await runDeferredWrites(trx, { last: own });
    return applied;
  }

  /** After the commit: runs the after-commit hooks of `applied` and settles the callers of `batch`. */
  #settle(instanceId: string, batch: Pending[], applied: Applied[]): void {
    for (const [index, { resolve }] of batch.entries()) {
      const done = applied[index];
      for (const event of done?.events ?? []) {
        for (const projection of this.#projections) {
          try {
            projection.afterCommit?.(instanceId, event);
          } catch (error) {
            this.#logger.error({ err: error, projection: projection.name }, 'projection afterCommit failed');
          }
        }
      }
      resolve(done?.result);
    }
  }
}
