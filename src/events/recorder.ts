import type { FastifyBaseLogger } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { EngineEvent } from '../engines/types.ts';
import type { Database } from '../store/schema.ts';

/**
 * A subscriber to engine events that writes inside the recorder's transaction: the instance state, the message
 * store and the webhook outbox are projections, so a message row and its outbox row commit together (DESIGN D2,
 * D10).
 */
export interface EventProjection {
  /** A short name for logs. */
  readonly name: string;
  /** Applies `event` of instance `instanceId`; throwing rolls the whole event back. */
  apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void>;
  /** Called after the transaction committed (e.g. to wake the delivery worker). Must not throw. */
  afterCommit?(instanceId: string, event: EngineEvent): void;
}

/**
 * Records engine events: one transaction per event over every projection, events of one instance applied
 * strictly in emission order (so `sequence` follows the platform's order, DESIGN D10).
 */
export class EventRecorder {
  readonly #db: Kysely<Database>;
  readonly #projections: EventProjection[];
  readonly #logger: FastifyBaseLogger;
  /** Tail of each instance's queue; removed when the queue drains so idle instances cost nothing. */
  readonly #tails = new Map<string, Promise<void>>();

  constructor(db: Kysely<Database>, projections: EventProjection[], logger: FastifyBaseLogger) {
    this.#db = db;
    this.#projections = projections;
    this.#logger = logger;
  }

  /** Adds a projection (applied after the existing ones). */
  use(projection: EventProjection): void {
    this.#projections.push(projection);
  }

  /**
   * Records one event after every earlier event of the same instance.
   * @throws the projection's error when the transaction fails (nothing of the event is kept).
   */
  record(instanceId: string, event: EngineEvent): Promise<void> {
    const previous = this.#tails.get(instanceId) ?? Promise.resolve();
    const run = previous.then(() => this.#apply(instanceId, event));
    const tail = run.catch(() => undefined);
    this.#tails.set(instanceId, tail);
    void tail.then(() => {
      if (this.#tails.get(instanceId) === tail) this.#tails.delete(instanceId);
    });
    return run;
  }

  /** Resolves when every event recorded so far has been applied (shutdown). */
  async drain(): Promise<void> {
    await Promise.all([...this.#tails.values()]);
  }

  async #apply(instanceId: string, event: EngineEvent): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      for (const projection of this.#projections) await projection.apply(trx, instanceId, event);
    });
    for (const projection of this.#projections) {
      try {
        projection.afterCommit?.(instanceId, event);
      } catch (error) {
        this.#logger.error({ err: error, projection: projection.name }, 'projection afterCommit failed');
      }
    }
  }
}
