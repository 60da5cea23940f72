import type { WAVersion } from 'baileys';
import type { FastifyBaseLogger } from 'fastify';
import { STABLE_OPEN_MS } from './close-policy.ts';

/**
 * What a live session's reopenings carry from one socket to the next within a connection
 * (docs/decisions/0016-session-lifecycle.md, docs/decisions/0025-live-engine.md): the attempts (the backoff's
 * exponent in `close-policy.ts`) and the platform version refreshes since the connect's first open or since the
 * connection last stayed open {@link STABLE_OPEN_MS}, the platform refusals in a row since it last opened, the
 * platform version the next socket opens with, the one pending retry timer and the timer of an open connection's
 * stable time. Every count starts over at each connect (`reset`); the refusals at each open, the others at the
 * connect's first open (what came before it was the pairing's: its restart) and once the connection stayed open
 * (`opened`). The timers end with the socket (`closed`, `cancel`).
 */
export class Reconnects {
  /**
   * Reopenings after a close since the connect's first open (since the connect, before it) or since the connection
   * last stayed open {@link STABLE_OPEN_MS}.
   */
  attempt = 0;
  /** Platform version refreshes over the same span as {@link attempt}. */
  refreshes = 0;
  /** Platform refusals in a row since the connection was last open. */
  refusals = 0;
  /** The platform version the next socket announces; undefined lets Baileys use its own. */
  version: WAVersion | undefined;
  /** True once a connection opened since the connect ({@link reset}). */
  #openedSinceConnect = false;
  #timer: NodeJS.Timeout | undefined;
  #stable: NodeJS.Timeout | undefined;
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

  /** Starts every count over: at a connect. */
  reset(): void {
    this.attempt = 0;
    this.refreshes = 0;
    this.refusals = 0;
    this.#openedSinceConnect = false;
  }

  /**
   * The connection opened: the login was accepted, so the refusals in a row start over at once. The attempts and
   * version refreshes start over at once too when this is the connect's first open: what a connect counts before it
   * is its pairing's (the platform's restart, 515, after the link, and logins after it that failed before opening)
   * and a version refresh while connecting, none of which says anything of a platform that has now accepted the
   * login. At a later open they start over once it has stayed open {@link STABLE_OPEN_MS} ms (unless {@link closed}
   * or {@link cancel} came first), so a platform that ends each login at once keeps backing off.
   */
  opened(): void {
    this.refusals = 0;
    if (!this.#openedSinceConnect) {
      this.#openedSinceConnect = true;
      this.attempt = 0;
      this.refreshes = 0;
    }
    this.#endStable();
    // Unreferenced: bookkeeping only, it must not keep a process up.
    this.#stable = setTimeout(() => {
      this.#stable = undefined;
      this.attempt = 0;
      this.refreshes = 0;
    }, STABLE_OPEN_MS).unref();
  }

  /** The socket closed: an open connection that had not stayed open {@link STABLE_OPEN_MS} keeps its counts. */
  closed(): void {
    this.#endStable();
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

  /** Cancels the pending retry, if any, and the count of an open connection's stable time ({@link closed}). */
  cancel(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#endStable();
  }

  #endStable(): void {
    if (this.#stable) clearTimeout(this.#stable);
    this.#stable = undefined;
  }
}
