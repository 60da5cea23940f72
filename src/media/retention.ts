import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';
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
export class MediaRetention {
  readonly #options: MediaRetentionOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(options: MediaRetentionOptions) {
    this.#options = options;
  }

  /** Runs once now and then every interval (timers do not keep the process alive). */
  start(): void {
    if (this.#timer) return;
    const tick = () => {
      this.#running ??= this.runOnce()
        .catch((error: unknown) => {
          this.#options.logger.warn({ err: error }, 'pruning the media store failed');
          return 0;
        })
        .finally(() => {
          this.#running = undefined;
        });
    };
    this.#timer = setInterval(tick, this.#options.intervalMs ?? 3_600_000);
    this.#timer.unref();
    tick();
  }

  /** Stops the schedule and waits for a run in progress. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  /**
   * Deletes every file fetched before now minus the retention.
   * @returns how many files were deleted.
   */
  async runOnce(): Promise<number> {
    const { files, clock, retentionMs, logger } = this.#options;
    const before = clock() - retentionMs;
    const deleted = await files.prune(before);
    if (deleted > 0) {
      logger.info({ deleted, before: new Date(before).toISOString() }, 'pruned the media store');
    }
    return deleted;
  }
}
