import type { FastifyBaseLogger } from 'fastify';
import { IdempotencyPurge } from '../app/idempotency.ts';
import type { Config } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import { MediaRetention } from '../media/retention.ts';
import { MediaStore } from '../media/store.ts';
import type { Store } from '../store/database.ts';
import { LogRetention } from '../webhooks/retention.ts';

/** The hourly clean-ups and the local media store they prune. */
export interface MaintenanceParts {
  /**
   * Prunes finished events older than both `WEBHOOK_RETENTION_DAYS` and `EVENT_RETENTION_DAYS` (the delivery log and
   * the event log, docs/decisions/0030-event-log.md), and finished send jobs.
   */
  retention: LogRetention;
  /** The local store of downloaded media files. */
  mediaFiles: MediaStore;
  /** Prunes downloaded media files older than `MEDIA_RETENTION_DAYS`. */
  mediaRetention: MediaRetention;
  /** Deletes `Idempotency-Key` rows past their 24 h (docs/decisions/0010-idempotency.md). */
  idempotencyPurge: IdempotencyPurge;
}

/**
 * Builds the clean-ups and, when `start` is true, starts them (tests that drive the worker leave them stopped).
 * `idempotencyClock` is the clock idempotency keys' expiries are set on (the node's store clock,
 * docs/decisions/0010-idempotency.md), which their purge judges them on.
 */
export function wireMaintenance(
  config: Config,
  deps: { store: Store; clock: Clock; idempotencyClock: Clock; logger: FastifyBaseLogger; start: boolean },
): MaintenanceParts {
  const { store, clock, logger } = deps;
  const retention = new LogRetention({
    db: store.db,
    clock,
    logger,
    retentionMs: config.webhook.retentionMs,
    eventRetentionMs: config.events.retentionMs,
  });
  const mediaFiles = new MediaStore({ dir: config.media.dir, clock });
  const mediaRetention = new MediaRetention({
    files: mediaFiles,
    clock,
    logger,
    retentionMs: config.media.retentionMs,
  });
  const idempotencyPurge = new IdempotencyPurge({ store, clock: deps.idempotencyClock, logger });
  if (deps.start) {
    retention.start();
    mediaRetention.start();
    idempotencyPurge.start();
  }
  return { retention, mediaFiles, mediaRetention, idempotencyPurge };
}
