import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { Database } from '../store/schema.ts';
import { instancesWithDueJobs } from '../store/send-job-claims.ts';

/** What a {@link DueSweep} needs. */
export interface DueSweepDeps {
  db: Kysely<Database>;
  /**
   * The clock due times are judged on, the store's (queue-deps.ts `dueClockOf`;
   * docs/decisions/0112-send-due-times-on-the-store-clock.md).
   */
  clock: Clock;
  logger: FastifyBaseLogger;
  /** How often instances with due jobs are looked for, ms. */
  everyMs: number;
  /** Told each instance with a due job (a live job whose `run_at` has come); decides whether to wake its queue. */
  due(instanceId: string): void;
}

/**
 * The send queue's periodic look for instances with due jobs (docs/decisions/0009-sends-as-jobs.md): scheduled
 * sends whose time came, and jobs a dead node left `sending`, wake their instance's queue on the node holding it.
 * A failed look is logged and tried again at the next one.
 */
export class DueSweep {
  readonly #deps: DueSweepDeps;
  #timer: NodeJS.Timeout | undefined;

  /** Cheap, no I/O; nothing runs before {@link start}. */
  constructor(deps: DueSweepDeps) {
    this.#deps = deps;
  }

  /** Looks every `everyMs` from now on (the timer keeps no process alive). */
  start(): void {
    this.#timer = setInterval(() => void this.#look(), this.#deps.everyMs);
    this.#timer.unref();
  }

  /** Stops looking. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #look(): Promise<void> {
    try {
      for (const instanceId of await instancesWithDueJobs(this.#deps.db, this.#deps.clock()))
        this.#deps.due(instanceId);
    } catch (error) {
      this.#deps.logger.warn({ err: error }, 'looking for due sends failed; trying again at the next sweep');
    }
  }
}
