import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { ConnectionState } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { SessionTable } from './session-table.ts';
import { RECONNECT_RETRY_AFTER_S, reconnecting, stoppedSession } from './status.ts';

/** What a {@link SessionAvailability} asks of the session manager's restores (`SessionRestorer`, restore.ts). */
export interface PendingRestores {
  /** True while a retry of `instanceId`'s restore is pending: its session comes back by itself. */
  waiting(instanceId: string): boolean;
}

/**
 * Whether the session of an instance in this process can serve, and what a call needing it is answered while it
 * cannot (the session manager's, src/sessions/manager.ts; docs/decisions/0016-session-lifecycle.md): logged in and
 * connected, `409` until a login or a `connect`, or `503` with `Retry-After` while the connection comes back by
 * itself. Counts the connects under way here ({@link whileConnecting}), which come back by themselves.
 */
export class SessionAvailability {
  readonly #table: SessionTable;
  readonly #restores: PendingRestores;
  /** Connects and restores under way in this process, by instance id ({@link comingBack}). */
  readonly #connecting = new Map<string, number>();

  /** `table` holds the sessions of this process; `restores` says which restores wait for a retry. */
  constructor(table: SessionTable, restores: PendingRestores) {
    this.#table = table;
    this.#restores = restores;
  }

  /**
   * The session of `instance` when it can reach the platform: logged in and connected (every messaging,
   * contacts and groups operation needs this).
   * @throws DomainError conflict `instance is not logged in` before login
   *   (docs/decisions/0001-envelope-and-error-codes.md), `instance is not connected` when logged in but disconnected
   *   (disconnect keeps the session, docs/api.md#session); platform_unreachable (503)
   *   `not connected to the platform right now` with `retryAfter` while a connection that should be up is down and
   *   coming back by itself ({@link comingBack}; a stored login whose restore waits for a retry counts as logged in,
   *   {@link stateOf}); not_connected (409) `instance is not connected: <reason>` when it
   *   should be up but stopped until the next `connect` (the platform replaced or refused the session, a connect
   *   failed; docs/decisions/0016-session-lifecycle.md), so no client retries for ever on a `Retry-After`.
   */
  ready(instance: Instance): EngineSession {
    const session = this.#table.get(instance.id);
    const state = this.stateOf(instance, session);
    const loggedIn = state ? state.loggedIn : instance.jid !== null;
    if (!loggedIn) throw errors.notLoggedIn();
    if (session && state?.connected) return session;
    if (instance.desiredState !== 'connected') throw errors.notConnected();
    // Asked to be connected but the connection is down: the caller may retry shortly only while it comes back by
    // itself (docs/decisions/0001-envelope-and-error-codes.md).
    if (this.comingBack(instance.id)) throw reconnecting();
    throw stoppedSession(state?.reason);
  }

  /**
   * True when the session of instance `instanceId`, which should be connected, comes back by itself: none is in
   * this process yet (a restore at boot, a node taking the instance over, docs/decisions/0008-leases-and-fencing.md),
   * its engine reconnects by itself (`EngineSession.reconnecting`: a dropped socket, a restart stream error), a
   * connect or restore of it is under way here, or its restore's retry is pending (on one node a boot restore's
   * backoff while the platform or the store does not answer, restore.ts `restoreRetried`; on several nodes the lease
   * keeper's next round, `SessionManager.restoreFailed`). False for a session stopped until the next `connect`
   * (the platform replaced or refused it, a connect that failed with no retry to come).
   */
  comingBack(instanceId: string): boolean {
    const session = this.#table.get(instanceId);
    if (!session) return true;
    return (
      session.reconnecting?.() === true ||
      this.#connecting.has(instanceId) ||
      this.#restores.waiting(instanceId)
    );
  }

  /**
   * `connecting`, a connect of instance `instanceId`'s session, counted in {@link #connecting} until it settles: the
   * engine may say nothing of it meanwhile (a lock taken, credentials read before its socket opens).
   */
  whileConnecting(instanceId: string, connecting: Promise<void>): Promise<void> {
    this.#connecting.set(instanceId, (this.#connecting.get(instanceId) ?? 0) + 1);
    return connecting.finally(() => {
      const left = (this.#connecting.get(instanceId) ?? 1) - 1;
      if (left > 0) this.#connecting.set(instanceId, left);
      else this.#connecting.delete(instanceId);
    });
  }

  /**
   * The session of `instance` in this process for an operation that reports on its own whether it needs a login or a
   * connection (the sandbox's helpers): the kept session if there is one; else, when the instance should be
   * connected and logged in, none is (a restore at boot or a hand-over between nodes is under way); else a new
   * session object that is not kept (see `SessionManager.detached`), which answers not_logged_in or not_connected
   * itself.
   * @throws DomainError platform_unreachable (503) `not connected to the platform right now` with `retryAfter`
   *   ({@link RECONNECT_RETRY_AFTER_S} s) when the instance should be connected but has no session here
   *   (docs/decisions/0001-envelope-and-error-codes.md).
   */
  async current(instance: Instance): Promise<EngineSession> {
    const session = this.#table.get(instance.id);
    if (session) return session;
    if (instance.desiredState === 'connected' && instance.jid !== null) throw reconnecting();
    return this.#table.keptOrNew(instance, false);
  }

  /**
   * The state of `session`, the session of `instance` here (undefined: none), as {@link ready} and
   * `SessionManager.status` read it: undefined, as without a session, while its restore waits for a retry and its
   * engine read no login (docs/decisions/0016-session-lifecycle.md): a restore the store failed before the
   * credentials were read (the one-socket lock not taken) leaves the engine not knowing them, and the stored login
   * stands until they are read.
   */
  stateOf(instance: Instance, session: EngineSession | undefined): ConnectionState | undefined {
    const state = session?.state();
    if (state?.loggedIn === false && instance.jid !== null && this.#restores.waiting(instance.id))
      return undefined;
    return state;
  }
}
