import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
import { PeriodicJob } from '../ops/periodic-job.ts';
import type { MediaStore } from './store.ts';

/** Options of the {@link MediaRetention} job; times in milliseconds. */
export interface MediaRetentionOptions {
  files: MediaStore;
  clock: Clock;
  logger: FastifyBaseLogger;
  /** Age after which a downloaded file leaves the local media store (`MEDIA_RETENTION_DAYS`). */
  retentionMs: number;
  /** How often the job runs (default one hour; the first run is at start). */
  intervalMs?: number;
}

/**
 * Keeps the local media store bounded in time, as the webhook log's retention does for events: every file
 * fetched longer ago than the retention is deleted. A later request for it fetches it from the platform again
 * (while the platform still has it). Runs in every process, on that process's own store.
 */
export class MediaRetention extends PeriodicJob {
  readonly #options: MediaRetentionOptions;

  constructor(options: MediaRetentionOptions) {
    super({
      logger: options.logger,
      ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
      failure: 'pruning the media store failed',
    });
    this.#options = options;
  }

  /**
   * Deletes every file fetched before now minus the retention.
   * @returns how many files were deleted.
   */
  override async runOnce(): Promise<number> {
    const { files, clock, retentionMs, logger } = this.#options;
    const before = clock() - retentionMs;
    const deleted = await files.prune(before);
    if (deleted > 0) {
      logger.info({ deleted, before: new Date(before).toISOString() }, 'pruned the media store');
    }
    return deleted;
  }
}
