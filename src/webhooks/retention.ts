import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import { PeriodicJob } from '../ops/periodic-job.ts';
import type { Database } from '../store/schema.ts';
import { pruneSendJobs } from '../store/send-jobs.ts';
import { deleteOrphanDeliveries, pruneWebhookLog } from '../store/webhook-log.ts';

/** One day, ms: the least time a finished send job is kept. */
const DAY_MS = 86_400_000;

/** Options of the {@link LogRetention} job; times in milliseconds. */
export interface LogRetentionOptions {
  db: Kysely<Database>;
  clock: Clock;
  logger: FastifyBaseLogger;
  /**
   * Age after which a finished event may leave the delivery log (`WEBHOOK_RETENTION_DAYS`); also the retention of
   * finished send jobs.
   */
  retentionMs: number;
  /**
   * Age before which no event leaves the event log, whatever its delivery (`EVENT_RETENTION_DAYS`,
   * docs/decisions/0030-event-log.md); omitted: only `retentionMs` counts.
   */
  eventRetentionMs?: number;
  /** How often the job runs (default one hour; the first run is at start). */
  intervalMs?: number;
  /** Events deleted per statement (default 1,000), so a large backlog never holds a long lock. */
  batch?: number;
}

/**
 * Keeps the stored events and the send jobs bounded. One event row serves both the delivery log
 * (docs/decisions/0005-outbox-and-delivery.md) and the event log (docs/decisions/0030-event-log.md), so an event
 * leaves the store, with its delivery and attempts, only when it is older than both retentions
 * (`WEBHOOK_RETENTION_DAYS` and `EVENT_RETENTION_DAYS`, the longer one wins) and its delivery is over (delivered,
 * failed, never queued); an event whose delivery is pending is never touched, whatever its age. Finished send jobs
 * (sent, failed, canceled; docs/decisions/0009-sends-as-jobs.md) follow the delivery log's retention, never less than
 * a day; pending jobs are never touched. Runs in every process; deletions are idempotent.
 */
export class LogRetention extends PeriodicJob {
  readonly #options: LogRetentionOptions;

  constructor(options: LogRetentionOptions) {
    super({
      logger: options.logger,
      ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
      failure: 'pruning the webhook delivery log failed',
    });
    this.#options = options;
  }

  /**
   * Deletes the deliveries queued to endpoints deleted meanwhile (`deleteOrphanDeliveries`), every finished event
   * older than both retentions, then every finished send job older than the delivery log's retention (at least a
   * day), batch by batch, serving the I/O due between two batches; after {@link stop} the run ends with the batch
   * in progress (the next run goes on).
   * @returns how many events and send jobs were deleted.
   */
  override async runOnce(): Promise<number> {
    const { db, clock, retentionMs, logger } = this.#options;
    const batch = this.#options.batch ?? 1000;
    const eventsKeptMs = Math.max(retentionMs, this.#options.eventRetentionMs ?? 0);
    const before = new Date(clock() - eventsKeptMs).toISOString();
    const orphans = await deleteOrphanDeliveries(db, batch);
    if (orphans > 0) logger.info({ endpoints: orphans }, 'deleted deliveries queued to deleted endpoints');
    let total = 0;
    let more = true;
    while (more) {
      const { chosen, deleted } = await pruneWebhookLog(db, before, batch);
      total += deleted;
      // A full batch may leave more, also when its re-check kept some of the events it chose.
      more = chosen >= batch && (await this.nextBatch());
    }
    if (total > 0) logger.info({ deleted: total, before }, 'pruned old events (delivery log and event log)');
    // Finished send jobs follow the same retention, never less than a day (the new-chats-per-day pace counts it).
    const jobsBefore = clock() - Math.max(retentionMs, DAY_MS);
    let jobs = 0;
    more = true;
    while (more) {
      const deleted = await pruneSendJobs(db, jobsBefore, batch);
      jobs += deleted;
      more = deleted >= batch && (await this.nextBatch());
    }
    if (jobs > 0) logger.info({ deleted: jobs }, 'pruned finished send jobs');
    return total + jobs;
  }
}
