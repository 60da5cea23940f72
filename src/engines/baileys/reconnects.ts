import type { WAVersion } from 'baileys';
import type { FastifyBaseLogger } from 'fastify';

/**
 * What a live session's reopenings carry from one socket to the next within a connection
 * (docs/decisions/0016-session-lifecycle.md, docs/decisions/0025-live-engine.md): the attempts since the connection
 * was last open (the backoff's exponent in `close-policy.ts`), the platform version refreshes tried, the platform
 * refusals in a row, the platform version the next socket opens with, and the one pending retry timer. The counts
 * start over at each connect and each open (`reset`); the timer ends with the socket (`cancel`).
 */
export class Reconnects {
  /** Reopenings after a close since the connection was last open (0 after `reset`). */
  attempt = 0;
  /** Platform version refreshes since the connection was last open. */
  refreshes = 0;
  /** Platform refusals in a row since the connection was last open. */
  refusals = 0;
  /** The platform version the next socket announces; undefined lets Baileys use its own. */
  version: WAVersion | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #fetchVersion: () => Promise<WAVersion>;
  readonly #logger: FastifyBaseLogger;

  /**
   * @param version the version to open with until a refresh, or undefined for Baileys' own.
   * @param fetchVersion reads the platform's current version (a refresh after a 405 close).
   * @param logger where a refresh and its failure are logged.
   */
  constructor(
    version: WAVersion | undefined,
    fetchVersion: () => Promise<WAVersion>,
    logger: FastifyBaseLogger,
  ) {
    this.version = version;
    this.#fetchVersion = fetchVersion;
    this.#logger = logger;
  }

  /** Starts the counts over: at a connect and when the connection opens. */
  reset(): void {
    this.attempt = 0;
    this.refreshes = 0;
    this.refusals = 0;
  }

  /**
   * Counts a refresh and reads the platform's current version; a failure is logged and the current version kept
   * (the next socket tries it again). Never throws.
   */
  async refreshVersion(): Promise<void> {
    this.refreshes += 1;
    try {
      this.version = await this.#fetchVersion();
      this.#logger.info({ version: this.version.join('.') }, 'platform version refreshed');
    } catch (error) {
      this.#logger.warn(
        { err: error },
        'refreshing the platform version failed; retrying with the current one',
      );
    }
  }

  /** Counts an attempt and runs `reopen` after `delayMs` ms, replacing any retry pending. */
  schedule(delayMs: number, reopen: () => void): void {
    this.cancel();
    this.attempt += 1;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      reopen();
    }, delayMs);
  }

  /** Cancels the pending retry, if any. */
  cancel(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
