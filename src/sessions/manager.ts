import type { Environment } from '../domain/environment.ts';
import { DomainError, errors } from '../domain/errors.ts';
import { DEFAULT_SUBSCRIPTION, EVENT_TYPES, type EventType, type Instance } from '../domain/instance.ts';
import type { ConnectionState, PairingCode } from '../domain/messages.ts';
import type { CloseOptions, Engine, EngineSession } from '../engines/engine.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { getInstance, updateInstance } from '../store/instances.ts';
import type { LeaseFence } from '../store/leases.ts';
import { RecordBacklog } from './backlog.ts';
import { createEngineSession } from './engine-session.ts';
import { recordRetryPolicy, type SessionManagerOptions } from './manager-options.ts';
import type { RecordRetryPolicy } from './record-retry.ts';
import { type ListedInstance, SessionRestorer } from './restore.ts';
import {
  type ConnectResult,
  currentPairingCode,
  LOGIN_VERIFY_MS,
  RECONNECT_RETRY_AFTER_S,
  reconnecting,
  type SessionStatus,
  sessionStatus,
  stoppedSession,
} from './status.ts';
import { InstanceTurns } from './turns.ts';

export type { ConnectResult, SessionStatus } from './status.ts';

/** Where a session's fence comes from: the lease this node holds of an instance, if any (the lease keeper). */
export interface LeaseFences {
  /** The owner and token of this node's lease of `instanceId`, as of its last renewal or claim; undefined: none. */
  fenceOf(instanceId: string): LeaseFence | undefined;
}

/**
 * Owns the engine session of every instance in this process and the session lifecycle of docs/api.md#session and
 * docs/decisions/0016-session-lifecycle.md: connect (subscription, `immediate`), status, QR, disconnect, logout, and
 * restoring sessions at boot. Sessions are created lazily; engine events flow to the {@link EventRecorder}.
 */
export class SessionManager {
  readonly #options: SessionManagerOptions;
  readonly #sessions = new Map<string, EngineSession>();
  /** The environments whose engine is prepared ({@link Engine.init} resolved). */
  readonly #prepared = new Set<Environment>();
  /** Boot restores and their retries (cancelled by any user action on the instance). */
  readonly #restorer: SessionRestorer;
  /** The lifecycle steps that must not interleave, one queue per instance ({@link InstanceTurns}). */
  readonly #turns = new InstanceTurns();
  /** Connects and restores under way in this process, by instance id ({@link comingBack}). */
  readonly #connecting = new Map<string, number>();
  /** Disconnects and logouts whose stored state committed, in this process ({@link stops}). */
  #stops = 0;
  /** Aborted at shutdown: recordings and credential reads waiting for the store give up. */
  readonly #closing = new AbortController();
  /**
   * Per kept session, aborted when it is released ({@link release}): its credential writes waiting for the store
   * stop without another try (another node may own the instance by then).
   */
  readonly #released = new Map<EngineSession, AbortController>();
  /**
   * The closes of released sessions still running ({@link release}), by instance id: a new session of the instance
   * is made only once its old one closed, and {@link closeAll} waits for them.
   */
  readonly #releasing = new Map<string, Promise<void>>();
  /** With several nodes, the leases this node holds: each new session's key writes are fenced by its own. */
  #leases: LeaseFences | undefined;
  /** Why no session is made in this process any more ({@link fence}); undefined while sessions may be made. */
  #fenced: DomainError | undefined;
  readonly #policy: RecordRetryPolicy;
  /** Events of this process waiting to be recorded (metrics, the backlog warning). */
  readonly backlog: RecordBacklog;

  constructor(options: SessionManagerOptions) {
    this.#options = options;
    this.#policy = recordRetryPolicy(options.recordRetry);
    this.backlog = options.backlog ?? new RecordBacklog({ logger: options.logger, clock: options.clock });
    this.#restorer = new SessionRestorer({
      db: options.db,
      logger: options.logger,
      ...(options.restoreRetry ? { retry: options.restoreRetry } : {}),
      connect: (instanceId, listed) => this.restore(instanceId, listed),
      stops: () => this.#stops,
      connected: (instanceId) => this.#sessions.get(instanceId)?.state().connected === true,
      kept: (instanceId) => this.#sessions.has(instanceId),
    });
  }

  /**
   * Fences the key writes of every session made from now on by the lease `leases` says this node holds of its
   * instance when the session is made (several nodes, docs/decisions/0008-leases-and-fencing.md): a write lands
   * only while the lease still carries that owner and token (src/store/engine-auth.ts). Sessions of an instance
   * without a lease here are not fenced. Called once, by the cluster's wiring, before any session is restored.
   */
  fenceWith(leases: LeaseFences): void {
    this.#leases = leases;
  }

  /**
   * The session of `instance`, created on first use (its engine prepared first, {@link Engine.init}).
   * @throws DomainError not_ready once shutdown began ({@link closeAll}) and the session did not exist; what
   *   preparing the engine threw (its code could not be loaded).
   */
  async session(instance: Instance): Promise<EngineSession> {
    const existing = this.#sessions.get(instance.id);
    if (existing) return existing;
    return this.#keptOrNew(instance, true);
  }

  /**
   * Once the engine of `instance` is prepared: its kept session (another call may have made it meanwhile), else a
   * new session object, kept when `keep` (in the same step as the check, so concurrent callers share one). A session
   * to keep is made only once the close of the instance's released one ended ({@link release}): that close may still
   * hold the one-socket lock, or record the events its socket received, in order before the new one's.
   * @throws as {@link #prepare}.
   */
  async #keptOrNew(instance: Instance, keep: boolean): Promise<EngineSession> {
    await this.#prepare(instance.env);
    if (keep && this.#releasing.has(instance.id)) {
      while (this.#releasing.has(instance.id)) await this.#releasing.get(instance.id);
      if (this.#closing.signal.aborted) throw new DomainError('not_ready', 'server is shutting down');
    }
    const kept = this.#sessions.get(instance.id);
    if (kept) return kept;
    // A new engine session with the context every engine gets (engine-session.ts).
    const released = new AbortController();
    const session = createEngineSession(this.#options, instance, {
      policy: this.#policy,
      signal: this.#closing.signal,
      released: released.signal,
      backlog: this.backlog,
      fence: this.#leases?.fenceOf(instance.id),
    });
    if (keep) {
      this.#sessions.set(instance.id, session);
      this.#released.set(session, released);
    }
    return session;
  }

  /**
   * Resolves once the engine of `env` is prepared (at once after the first time).
   * @throws DomainError not_ready `server is shutting down` when {@link closeAll} began meanwhile, so no session is
   *   made after the others were closed; what preparing threw (logged here, at error level, for the live engine).
   */
  async #prepare(env: Environment): Promise<void> {
    if (!this.#prepared.has(env)) {
      try {
        await this.#options.engines[env].init?.();
      } catch (error) {
        this.#options.logger.error(
          { err: error, env },
          'the engine of this environment could not be loaded: its instances cannot connect',
        );
        throw error;
      }
      this.#prepared.add(env);
    }
    if (this.#closing.signal.aborted) throw new DomainError('not_ready', 'server is shutting down');
    if (this.#fenced !== undefined) throw this.#fenced;
  }

  /**
   * The session of `instance` for an operation that needs no connection (a media download): the session in
   * this process if there is one, else a new session object that is not kept, so the instance's state as this
   * process reports it does not change (a kept, never-connected session would read as not logged in).
   */
  async detached(instance: Instance): Promise<EngineSession> {
    return this.#sessions.get(instance.id) ?? this.#keptOrNew(instance, false);
  }

  /**
   * The session of `instance` when it can reach the platform: logged in and connected (every messaging,
   * contacts and groups operation needs this).
   * @throws DomainError conflict `instance is not logged in` before login
   *   (docs/decisions/0001-envelope-and-error-codes.md), `instance is not connected` when logged in but disconnected
   *   (disconnect keeps the session, docs/api.md#session); platform_unreachable (503)
   *   `not connected to the platform right now` with `retryAfter` while a connection that should be up is down and
   *   coming back by itself ({@link comingBack}; a stored login whose restore waits for a retry counts as logged in,
   *   {@link #stateOf}); not_connected (409) `instance is not connected: <reason>` when it
   *   should be up but stopped until the next `connect` (the platform replaced or refused the session, a connect
   *   failed; docs/decisions/0016-session-lifecycle.md), so no client retries for ever on a `Retry-After`.
   */
  ready(instance: Instance): EngineSession {
    const session = this.#sessions.get(instance.id);
    const state = this.#stateOf(instance, session);
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
   * keeper's next round, {@link restoreFailed}). False for a session stopped until the next `connect`
   * (the platform replaced or refused it, a connect that failed with no retry to come).
   */
  comingBack(instanceId: string): boolean {
    const session = this.#sessions.get(instanceId);
    if (!session) return true;
    return (
      session.reconnecting?.() === true ||
      this.#connecting.has(instanceId) ||
      this.#restorer.waiting(instanceId)
    );
  }

  /**
   * `connecting`, a connect of instance `instanceId`'s session, counted in {@link #connecting} until it settles: the
   * engine may say nothing of it meanwhile (a lock taken, credentials read before its socket opens).
   */
  #whileConnecting(instanceId: string, connecting: Promise<void>): Promise<void> {
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
   * session object that is not kept (see {@link detached}), which answers not_logged_in or not_connected itself.
   * @throws DomainError platform_unreachable (503) `not connected to the platform right now` with `retryAfter`
   *   ({@link RECONNECT_RETRY_AFTER_S} s) when the instance should be connected but has no session here
   *   (docs/decisions/0001-envelope-and-error-codes.md).
   */
  async current(instance: Instance): Promise<EngineSession> {
    const session = this.#sessions.get(instance.id);
    if (session) return session;
    if (instance.desiredState === 'connected' && instance.jid !== null) throw reconnecting();
    return this.#keptOrNew(instance, false);
  }

  /** The open session of `instance` if one exists in this process (no creation). */
  existing(instanceId: string): EngineSession | undefined {
    return this.#sessions.get(instanceId);
  }

  /**
   * Connects `instance` (docs/api.md#session, docs/decisions/0016-session-lifecycle.md). `subscribe` replaces the
   * stored subscription (kept in the canonical order of {@link EVENT_TYPES}, duplicates dropped); omitted on
   * the first connect it becomes all four event types, omitted later the stored list is kept. With
   * `immediate:false` and a stored login, waits until login is verified, at most {@link LOGIN_VERIFY_MS}.
   * A successful connect stamps `lastConnectedAt` (epoch ms of the clock as RFC 3339), so requests that name no
   * instance address this one from now on (docs/decisions/0002-instance-resolution.md: pairing started or a session
   * resumed).
   * @throws DomainError timeout (504) when the login is not verified in time; not_found `instance not found` when
   *   the instance was deleted meanwhile (its session is closed); engine errors (502/503) as raised.
   */
  async connect(
    instance: Instance,
    input: { subscribe?: EventType[]; immediate: boolean },
  ): Promise<ConnectResult> {
    this.#restorer.cancel(instance.id);
    const wanted = input.subscribe ?? instance.subscribe ?? DEFAULT_SUBSCRIPTION;
    const subscribe = EVENT_TYPES.filter((type) => wanted.includes(type));
    await updateInstance(this.#options.db, instance.id, { subscribe, desiredState: 'connected' });
    const session = await this.session(instance);
    await this.#whileConnecting(instance.id, session.connect());
    const wasLoggedIn = instance.jid !== null;
    if (!input.immediate && wasLoggedIn) {
      const ok = await session.waitForLogin(LOGIN_VERIFY_MS);
      if (!ok) throw new DomainError('timeout', 'login could not be verified within 10 seconds');
    }
    // The instance this connect addressed becomes the default one (docs/decisions/0002-instance-resolution.md: the
    // latest successful connect, whether it starts pairing or resumes a stored session, makes its instance the most
    // recently connected).
    const stamped = await updateInstance(this.#options.db, instance.id, {
      lastConnectedAt: new Date(this.#options.clock()).toISOString(),
    });
    if (!stamped) {
      // Deleted while connecting (DELETE /v1/instances/{id}, docs/decisions/0029-instances-over-the-api.md): the
      // session just made must not outlive its instance.
      await this.release(instance.id);
      throw errors.instanceNotFound();
    }
    const state = session.state();
    return {
      details: 'Connected!',
      events: subscribe.join(','),
      jid: state.loggedIn ? (state.jid ?? '') : '',
      webhook: instance.webhookUrl ?? '',
    };
  }

  /**
   * The status of `instance` (docs/api.md#session, docs/decisions/0016-session-lifecycle.md). Without a session in
   * this process: not connected.
   */
  status(instance: Instance): SessionStatus {
    return sessionStatus(instance, this.#stateOf(instance, this.#sessions.get(instance.id)));
  }

  /**
   * The state of `session`, the session of `instance` here (undefined: none), as {@link ready} and {@link status}
   * read it: undefined, as without a session, while its restore waits for a retry and its engine read no login
   * (docs/decisions/0016-session-lifecycle.md): a restore the store failed before the credentials were read (the
   * one-socket lock not taken) leaves the engine not knowing them, and the stored login stands until they are read.
   */
  #stateOf(instance: Instance, session: EngineSession | undefined): ConnectionState | undefined {
    const state = session?.state();
    if (state?.loggedIn === false && instance.jid !== null && this.#restorer.waiting(instance.id))
      return undefined;
    return state;
  }

  /**
   * The current QR code of `instance` (docs/decisions/0016-session-lifecycle.md).
   * @throws DomainError conflict `already logged in` / `instance is not connected`.
   */
  pairingCode(instance: Instance): PairingCode {
    return currentPairingCode(instance, this.#sessions.get(instance.id));
  }

  /**
   * Starts linking by an 8-character code typed on the phone instead of a QR scan (live engine).
   * @throws DomainError invalid when the engine has no pairing by code (the sandbox: scan instead);
   *   conflict `already logged in` / `instance is not connected` as for the QR.
   */
  async requestPairingCode(instance: Instance, phone: string): Promise<string> {
    const session = await this.session(instance);
    if (!session.requestPairingCode) {
      throw errors.badRequest(
        'pairing by code is available on live instances only; the sandbox pairs with POST /v1/sandbox/scan',
      );
    }
    const state = session.state();
    if (state.loggedIn) throw errors.alreadyLoggedIn();
    if (!state.connected) throw errors.notConnected();
    return session.requestPairingCode(phone);
  }

  /**
   * Disconnects and keeps the login (docs/api.md#session): status becomes connected:false, loggedIn:true. Runs in
   * the instance's turn ({@link InstanceTurns}): a {@link restore} that read the instance before this call either
   * ends before it starts or, after it, finds the instance no longer wanted connected.
   */
  disconnect(instance: Instance): Promise<void> {
    return this.#stop(instance, (session) => session.disconnect());
  }

  /**
   * Logs out: unlinks the device and deletes the stored credentials (docs/api.md#session). Runs in the instance's
   * turn, as {@link disconnect}.
   */
  logout(instance: Instance): Promise<void> {
    return this.#stop(instance, (session) => session.logout());
  }

  /**
   * A stop the user asked for ({@link disconnect}, {@link logout}): cancels the instance's pending boot-restore
   * retry, then in its turn stores it wanted disconnected, counts the stop ({@link stops}) and runs `end` on its
   * session. @throws the store's error (nothing else ran) or what `end` throws.
   */
  #stop(instance: Instance, end: (session: EngineSession) => Promise<void>): Promise<void> {
    this.#restorer.cancel(instance.id);
    return this.#turns.run(instance.id, async () => {
      await updateInstance(this.#options.db, instance.id, { desiredState: 'disconnected' });
      this.#stops += 1;
      await end(await this.session(instance));
    });
  }

  /**
   * Connects the session of instance `instanceId` again when the user left it connected and logged in, as the store
   * says now, not as a caller read it earlier: the path of every reconnect nobody asked for (a restore at boot and
   * its retries, a node taking over a lease or serving a request for an instance it holds,
   * docs/decisions/0016-session-lifecycle.md, docs/decisions/0008-leases-and-fencing.md). The read and the start of
   * the connection run in the instance's turn ({@link InstanceTurns}), so a disconnect or logout that lands meanwhile
   * is never undone by it; the turn ends once the connection has started, so a disconnect does not wait for a
   * platform that does not answer (up to the engine's connect deadline): it ends the attempt, as it ends one a user
   * started.
   * `listed`, from a list of instances to restore read after {@link stops} was `listed.stops`, stands for the store's
   * row while no disconnect or logout has committed here since (a boot restore, before the server listens, reads
   * each row once instead of twice). `allowed`, when given, is asked in the turn right before the session is asked
   * to connect, once it is kept (listed by {@link ids}): false connects nothing (the lease keeper's fence is no
   * longer armed, docs/decisions/0008-leases-and-fencing.md; a fence firing from then on finds the session).
   * @returns whether it asked the session to connect (false: deleted, logged out or disconnected meanwhile, or not
   *   `allowed`).
   * @throws what connecting throws (platform_unreachable 503 when the platform cannot be reached); the store's
   *   error when the instance cannot be read.
   */
  async restore(instanceId: string, listed?: ListedInstance, allowed?: () => boolean): Promise<boolean> {
    const started = await this.#turns.run(instanceId, async () => {
      const instance =
        listed !== undefined && listed.stops === this.#stops
          ? listed.instance
          : await getInstance(this.#options.db, instanceId);
      if (instance?.desiredState !== 'connected' || instance.jid === null) return undefined;
      if (allowed !== undefined && !allowed()) return undefined;
      const session = await this.session(instance);
      // Asked again once the session is kept: a fence that fired while it was made may not have found it.
      if (allowed !== undefined && !allowed()) return undefined;
      const connecting = this.#whileConnecting(instanceId, session.connect());
      // Counted as connecting from here: a retry the lease keeper noted ({@link restoreFailed}) is under way.
      this.#restorer.retryStarted(instanceId);
      // Awaited below, outside the turn; handled here so a failure before that await is not reported unhandled.
      connecting.catch(() => undefined);
      return { connecting };
    });
    if (started === undefined) return false;
    await started.connecting;
    return true;
  }

  /**
   * The lease keeper's restore of `instanceId` failed with `error` (several nodes): unless the platform refused it
   * (`keeperRetries`, restore.ts), the keeper restores it again at its next round, and the instance comes back by
   * itself meanwhile ({@link comingBack}: `503` with `Retry-After`, as a boot restore's retry on one node while the
   * platform or the store does not answer); refused, it stays stopped until `connect` (`409`). Cleared by that
   * restore, a user action or a release.
   * @returns whether the keeper is to retry it.
   */
  restoreFailed(instanceId: string, error: unknown): boolean {
    return this.#restorer.retriedByCaller(instanceId, error);
  }

  /**
   * How many disconnects and logouts this process has committed to the store: a list of instances read after taking
   * it says, while it has not moved, whether each is still wanted connected ({@link restore}).
   */
  get stops(): number {
    return this.#stops;
  }

  /**
   * Reconnects every instance the user left connected and logged in; see {@link SessionRestorer.restoreAll}.
   * @returns how many instances were restored on the first try.
   */
  restoreAll(concurrency = 16): Promise<number> {
    return this.#restorer.restoreAll(concurrency);
  }

  /** Number of instances waiting for a restore retry (tests, metrics). */
  get pendingRestores(): number {
    return this.#restorer.pending;
  }

  /** Re-reads an instance (after a state change) or fails with 404. */
  async reload(instanceId: string): Promise<Instance> {
    const instance = await getInstance(this.#options.db, instanceId);
    if (!instance) throw errors.instanceNotFound();
    return instance;
  }

  /**
   * Closes every session of this process (shutdown); stored state is untouched. Final: afterwards no session is
   * made ({@link session}, {@link detached} and {@link current} answer not_ready for an instance without one).
   */
  async closeAll(): Promise<void> {
    // Recordings still waiting for the store make one last try and give up (logged with their event fields):
    // shutdown keeps its time budget (docs/deploy.md, What a database restart does).
    this.#closing.abort();
    this.backlog.stop();
    this.#restorer.stop();
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    this.#released.clear();
    await Promise.allSettled([...sessions.map((s) => s.close()), ...this.#releasing.values()]);
    await this.#options.recorder.drain();
  }

  /**
   * Closes and forgets the session of one instance, stored state untouched (several nodes,
   * docs/decisions/0008-leases-and-fencing.md: the node lost or handed over the instance's lease), and stops its
   * credential writes still waiting for the store, without another try: once the lease moves, the new owner writes
   * the instance's Signal keys, and a late write of this session would overwrite them. Its recordings go on waiting
   * out the store (the platform was told of their events; a late one overwrites nothing). A graceful release (a
   * hand-over) stops the writes once the session closed, so the incoming stanzas it lets finish are decrypted; a
   * `fenced` one (the lease is lost or about to expire) stops them first and ends the socket at once
   * ({@link EngineSession.close}). `reason` is what the stopped writes raise (the instance deleted: `instance not
   * found`); without it, `SessionReleasedError` (503, retry: the instance's new owner answers). The session is
   * forgotten at once ({@link ids} no longer lists it); its close, which lasts until the events its socket received
   * are recorded, runs on: a new session of the instance is made only once it ended, and {@link closeAll} waits for
   * it. Resolves once the close ended; a release of an instance whose close still runs resolves with that close.
   * Never throws; a close failure is logged.
   */
  release(instanceId: string, options: CloseOptions & { reason?: DomainError } = {}): Promise<void> {
    this.#restorer.cancel(instanceId);
    const session = this.#sessions.get(instanceId);
    if (!session) return this.#releasing.get(instanceId) ?? Promise.resolve();
    this.#sessions.delete(instanceId);
    const released = this.#released.get(session);
    this.#released.delete(session);
    if (options.fenced === true) released?.abort(options.reason);
    // Called in an async function so that a close throwing at once is caught as well.
    const closing = (async () => session.close(options.fenced === true ? { fenced: true } : {}))()
      .catch((error: unknown) =>
        this.#options.logger.warn({ err: error, instanceId }, 'closing a session failed'),
      )
      .finally(() => {
        released?.abort(options.reason);
        if (this.#releasing.get(instanceId) === closing) this.#releasing.delete(instanceId);
      });
    this.#releasing.set(instanceId, closing);
    return closing;
  }

  /**
   * Stops this process serving any instance, because another process took this node's id over
   * (docs/decisions/0008-leases-and-fencing.md, "Node identity"): that process renews the same leases and opens
   * the same sessions, so every session here is released fenced (its socket ended at once, its pending key writes
   * stopped), restore retries are dropped, and from now on no session is made: a call that would make one
   * ({@link session}, {@link restore}, {@link detached}) throws `reason`. Final. Never throws.
   */
  async fence(reason: DomainError): Promise<void> {
    this.#fenced = reason;
    this.#restorer.stop();
    await Promise.all(this.ids().map((id) => this.release(id, { fenced: true })));
  }

  /** Ids of the instances with a session in this process. */
  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /** Number of sessions held in this process (metrics). */
  get size(): number {
    return this.#sessions.size;
  }
}
