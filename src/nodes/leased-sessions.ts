import type { FastifyBaseLogger } from 'fastify';
import type { Instance } from '../domain/instance.ts';
import type { LeaseKeeperOptions } from './lease-options.ts';

/** Options of {@link LeasedSessions}: the keeper's local sessions and logger, and its fencing timer's check. */
export interface LeasedSessionsOptions {
  sessions: LeaseKeeperOptions['sessions'];
  logger: FastifyBaseLogger;
  /** True while this node's fencing timer is armed (`FenceTimer.armed`, src/nodes/lease-fence.ts). */
  armed: () => boolean;
}

/**
 * The local sessions of the instances a lease keeper holds (docs/decisions/0008-leases-and-fencing.md): restores the
 * session of an instance leased here ({@link ensureRestored}) and closes, fenced, the session of one whose lease
 * moved or lapsed ({@link release}). The closes run apart from the keeper's rounds, and a restore of an instance whose
 * session still closes here waits for that close to end.
 */
export class LeasedSessions {
  readonly #options: LeasedSessionsOptions;
  readonly #restoring = new Map<string, Promise<void>>();
  /**
   * Closes of sessions whose lease moved or lapsed, by instance id ({@link release}): they run apart from the
   * rounds, and a restore of the instance here waits for its close to end.
   */
  readonly #releasing = new Map<string, Promise<void>>();

  constructor(options: LeasedSessionsOptions) {
    this.#options = options;
  }

  /** The close of instance `instanceId`'s session started by {@link release} while it runs, else undefined. */
  closing(instanceId: string): Promise<void> | undefined {
    return this.#releasing.get(instanceId);
  }

  /**
   * Restores `instance`'s session here when it should be connected and is not (stored credentials, no QR). A
   * session already here that is not connected is asked to connect again while it comes back by itself
   * (`SessionManager.comingBack`: a no-op while its own connection attempt or reconnect runs; its restore failed
   * and is retried here, every round, unless the platform refused it); one the platform stopped (replaced, refused)
   * stays down until `connect`, as on one node (docs/decisions/0016-session-lifecycle.md), and answers `409`. Only
   * a session made here is logged as restored, once. `instance` may be stale: the session
   * manager connects only if the store still wants the instance connected when its turn comes
   * (`SessionManager.restore`), so a disconnect that lands meanwhile is not undone. Nothing is restored while
   * this node's fencing timer is not armed (`FenceTimer.armed`: asked again right before the session connects), and
   * a restore of an instance whose released session is still closing here starts once that close ended. Never
   * rejects: a failure is logged.
   */
  ensureRestored(instance: Instance): Promise<void> {
    const { sessions, armed } = this.#options;
    if (instance.desiredState !== 'connected' || instance.jid === null) return Promise.resolve();
    const releasing = this.#releasing.get(instance.id);
    const existing = releasing === undefined ? sessions.existing(instance.id) : undefined;
    if (existing !== undefined && (existing.state().connected || !sessions.comingBack(instance.id)))
      return Promise.resolve();
    if (!armed()) return Promise.resolve();
    const running = this.#restoring.get(instance.id);
    if (running) return running;
    const restore = (
      releasing === undefined ? this.#restore(instance) : releasing.then(() => this.#restore(instance))
    ).finally(() => this.#restoring.delete(instance.id));
    this.#restoring.set(instance.id, restore);
    return restore;
  }

  /** {@link ensureRestored}'s restore, once no close of the instance's session runs here. Never rejects. */
  async #restore(instance: Instance): Promise<void> {
    const { sessions, logger, armed } = this.#options;
    const existing = sessions.existing(instance.id);
    if (existing?.state().connected || !armed()) return;
    try {
      const restored = await sessions.restore(instance.id, undefined, () => armed());
      if (restored && existing === undefined)
        logger.info({ instanceId: instance.id }, 'session restored on this node');
    } catch (error) {
      // Retried at the next round unless the platform refused it: meanwhile the instance answers 503 with
      // Retry-After, as on one node while a restore's retry is pending; refused, it stays stopped (409) until
      // `connect`.
      const retry = sessions.restoreFailed(instance.id, error);
      logger.warn(
        { err: error, instanceId: instance.id, retry },
        retry
          ? 'restoring a session failed; retried at the next round'
          : 'restoring a session failed: refused by the platform, not retried',
      );
    }
  }

  /**
   * Starts the fenced close of the session of `instanceId` (`sessions.release`) unless one runs already, and keeps
   * it in {@link #releasing} until it ended (docs/decisions/0008-leases-and-fencing.md). Never rejects.
   */
  release(instanceId: string): Promise<void> {
    const running = this.#releasing.get(instanceId);
    if (running) return running;
    const closing = this.#options.sessions
      .release(instanceId, { fenced: true })
      .catch((error: unknown) =>
        this.#options.logger.warn({ err: error, instanceId }, 'closing a session failed'),
      )
      .finally(() => {
        if (this.#releasing.get(instanceId) === closing) this.#releasing.delete(instanceId);
      });
    this.#releasing.set(instanceId, closing);
    return closing;
  }
}
