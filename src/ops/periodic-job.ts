import type { FastifyBaseLogger } from 'fastify';

/** How a {@link PeriodicJob} runs; times in milliseconds. */
export interface PeriodicSchedule {
  logger: FastifyBaseLogger;
  /** How often the job runs (default one hour; the first run is at start). */
  intervalMs?: number;
  /** What the warning says when a run fails, e.g. `pruning the media store failed`. */
  failure: string;
}

/**
 * A job run once at start and then every interval in this process (retention jobs: the webhook delivery log, the
 * media store). A run never overlaps the previous one; a failed run is logged as a warning and the schedule goes
 * on. Timers do not keep the process alive. Subclasses implement {@link runOnce}; one that works in batches calls
 * {@link nextBatch} between them, so the requests that arrived meanwhile are served (better-sqlite3 answers within
 * the same turn of the event loop: without a yield a whole backlog runs in one turn) and a stop ends the run after
 * the batch in progress instead of after the whole backlog (docs/decisions/0023-operations.md shutdown budget).
 */
export abstract class PeriodicJob {
  readonly #schedule: PeriodicSchedule;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;
  #stopping = false;

  constructor(schedule: PeriodicSchedule) {
    this.#schedule = schedule;
  }

  /** Runs once now and then every interval. Calling it again while started does nothing. */
  start(): void {
    if (this.#timer) return;
    this.#stopping = false;
    const tick = () => {
      this.#running ??= this.runOnce()
        .catch((error: unknown) => {
          this.#schedule.logger.warn({ err: error }, this.#schedule.failure);
          return 0;
        })
        .finally(() => {
          this.#running = undefined;
        });
    };
    this.#timer = setInterval(tick, this.#schedule.intervalMs ?? 3_600_000);
    this.#timer.unref();
    tick();
  }

  /** Stops the schedule and waits for a run in progress. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  /**
   * Called by a run between two batches: waits for the I/O callbacks already due (`setImmediate`).
   * @returns false once {@link stop} was called: the run ends there; the next one goes on with the rest.
   */
  protected async nextBatch(): Promise<boolean> {
    await new Promise((resolve) => setImmediate(resolve));
    return !this.#stopping;
  }

  /** One run. @returns how many items it removed (or handled). */
  abstract runOnce(): Promise<number>;
}
