import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../domain/clock.ts';

/** How a {@link RecordBacklog} reports; times in ms. */
export interface RecordBacklogOptions {
  logger: FastifyBaseLogger;
  clock: Clock;
  /** Age of the oldest waiting event from which the backlog counts as lasting and is logged (default 5,000). */
  warnAfterMs?: number;
  /** Least time between two warnings about one backlog (default 60,000). */
  warnEveryMs?: number;
  /** How often a backlog is checked while it lasts (default 5,000). */
  checkEveryMs?: number;
}

/**
 * The events of this process waiting to be recorded (docs/deploy.md, What a database restart does): platform
 * events queued in an engine behind the one being recorded, and events whose recording is being tried or
 * retried. Served as the gauges `parley_inbound_backlog` and `parley_inbound_backlog_oldest_seconds`. While the
 * oldest waiting event is older than `warnAfterMs`, a warning `inbound events are waiting to be recorded` with
 * `count` and `oldestAgeMs` is logged at most once per `warnEveryMs`; when a logged backlog is recorded, an info
 * line `the inbound backlog was recorded` follows.
 */
export class RecordBacklog {
  readonly #options: RecordBacklogOptions;
  /** Waiting entries by token, in the order they started waiting (a Map keeps insertion order). */
  readonly #waiting = new Map<number, number>();
  #next = 0;
  #timer: NodeJS.Timeout | undefined;
  #lastWarnAt: number | undefined;

  constructor(options: RecordBacklogOptions) {
    this.#options = options;
  }

  /** Counts one event as waiting from now; call the returned function once, when it was recorded or given up. */
  enter(): () => void {
    const token = this.#next++;
    this.#waiting.set(token, this.#options.clock());
    this.#schedule();
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#waiting.delete(token);
      if (this.#waiting.size === 0) this.#drained();
    };
  }

  /** Events waiting now. */
  get count(): number {
    return this.#waiting.size;
  }

  /** Age of the oldest waiting event, ms (0 when none waits). */
  get oldestAgeMs(): number {
    const first = this.#waiting.values().next();
    return first.done ? 0 : Math.max(0, this.#options.clock() - first.value);
  }

  /** Stops the check timer (shutdown). */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Logs a warning when the backlog has lasted and the last one is old enough (also called by the timer). */
  check(): void {
    const { logger, clock } = this.#options;
    const oldestAgeMs = this.oldestAgeMs;
    if (this.count === 0 || oldestAgeMs < (this.#options.warnAfterMs ?? 5_000)) return;
    const now = clock();
    if (this.#lastWarnAt !== undefined && now - this.#lastWarnAt < (this.#options.warnEveryMs ?? 60_000))
      return;
    this.#lastWarnAt = now;
    logger.warn({ count: this.count, oldestAgeMs }, 'inbound events are waiting to be recorded');
  }

  #schedule(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => this.check(), this.#options.checkEveryMs ?? 5_000);
    this.#timer.unref();
  }

  #drained(): void {
    this.stop();
    if (this.#lastWarnAt === undefined) return;
    this.#lastWarnAt = undefined;
    this.#options.logger.info('the inbound backlog was recorded');
  }
}
