import { DomainError, errors } from '../domain/errors.ts';
import { DEFAULT_SUBSCRIPTION, EVENT_TYPES, type EventType, type Instance } from '../domain/instance.ts';
import type { PairingCode } from '../domain/messages.ts';
import type { CloseOptions, EngineSession } from '../engines/engine.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { getInstance, updateInstance } from '../store/instances.ts';
import { SessionAvailability } from './availability.ts';
import { RecordBacklog } from './backlog.ts';
import { recordRetryPolicy, type SessionManagerOptions } from './manager-options.ts';
import { type ListedInstance, SessionRestorer } from './restore.ts';
import { type LeaseFences, SessionTable } from './session-table.ts';
import {
  type ConnectResult,
  currentPairingCode,
  LOGIN_VERIFY_MS,
  type SessionStatus,
  sessionStatus,
} from './status.ts';
import { InstanceTurns } from './turns.ts';

export type { LeaseFences } from './session-table.ts';
export type { ConnectResult, SessionStatus } from './status.ts';

/**
 * Owns the engine session of every instance in this process and the session lifecycle of docs/api.md#session and
 * docs/decisions/0016-session-lifecycle.md: connect (subscription, `immediate`), status, QR, disconnect, logout, and
 * restoring sessions at boot. Sessions are created lazily; engine events flow to the {@link EventRecorder}.
 */
export class SessionManager {
  readonly #options: SessionManagerOptions;
  /** The sessions of this process: made, kept, released and closed (src/sessions/session-table.ts). */
  readonly #table: SessionTable;
  /** Boot restores and their retries (cancelled by any user action on the instance). */
  readonly #restorer: SessionRestorer;
  /** The lifecycle steps that must not interleave, one queue per instance ({@link InstanceTurns}). */
  readonly #turns = new InstanceTurns();
  /** What a call needing a session is answered, and the connects under way (src/sessions/availability.ts). */
  readonly #availability: SessionAvailability;
  /** Disconnects and logouts whose stored state committed, in this process ({@link stops}). */
  #stops = 0;
  /** Events of this process waiting to be recorded (metrics, the backlog warning). */
  readonly backlog: RecordBacklog;

  constructor(options: SessionManagerOptions) {
    this.#options = options;
    this.backlog = options.backlog ?? new RecordBacklog({ logger: options.logger, clock: options.clock });
    this.#table = new SessionTable(options, {
      policy: recordRetryPolicy(options.recordRetry),
      backlog: this.backlog,
    });
    this.#restorer = new SessionRestorer({
      db: options.db,
      logger: options.logger,
      ...(options.restoreRetry ? { retry: options.restoreRetry } : {}),
      connect: (instanceId, listed) => this.restore(instanceId, listed),
      stops: () => this.#stops,
      connected: (instanceId) => this.#table.get(instanceId)?.state().connected === true,
      kept: (instanceId) => this.#table.has(instanceId),
    });
    this.#availability = new SessionAvailability(this.#table, this.#restorer);
  }

  /**
   * Fences the key writes of every session made from now on by the lease `leases` says this node holds of its
   * instance when the session is made (several nodes, docs/decisions/0008-leases-and-fencing.md): a write lands
   * only while the lease still carries that owner and token (src/store/engine-auth.ts). Sessions of an instance
   * without a lease here are not fenced. Called once, by the cluster's wiring, before any session is restored.
   */
  fenceWith(leases: LeaseFences): void {
    this.#table.fenceWith(leases);
  }

  /**
   * The session of `instance`, created on first use (its engine prepared first, `Engine.init`).
   * @throws DomainError not_ready once shutdown began ({@link closeAll}) and the session did not exist; what
   *   preparing the engine threw (its code could not be loaded).
   */
  async session(instance: Instance): Promise<EngineSession> {
    const existing = this.#table.get(instance.id);
    if (existing) return existing;
    return this.#table.keptOrNew(instance, true);
  }

  /**
   * The session of `instance` for an operation that needs no connection (a media download): the session in
   * this process if there is one, else a new session object that is not kept, so the instance's state as this
   * process reports it does not change (a kept, never-connected session would read as not logged in).
   */
  async detached(instance: Instance): Promise<EngineSession> {
    return this.#table.get(instance.id) ?? this.#table.keptOrNew(instance, false);
  }

  /**
   * The session of `instance` when it can reach the platform: logged in and connected (every messaging, contacts and
   * groups operation needs this; `SessionAvailability.ready`, src/sessions/availability.ts).
   * @throws DomainError `409 instance is not logged in` / `instance is not connected[: <reason>]`, or `503 not
   *   connected to the platform right now` with `retryAfter` while it comes back by itself ({@link comingBack}).
   */
  ready(instance: Instance): EngineSession {
    return this.#availability.ready(instance);
  }

  /**
   * True when the session of instance `instanceId`, which should be connected, comes back by itself; false for one
   * stopped until the next `connect` (`SessionAvailability.comingBack`).
   */
  comingBack(instanceId: string): boolean {
    return this.#availability.comingBack(instanceId);
  }

  /**
   * The session of `instance` in this process for an operation that reports on its own whether it needs a login or a
   * connection (the sandbox's helpers; `SessionAvailability.current`).
   * @throws DomainError platform_unreachable (503) with `retryAfter` when the instance should be connected but has
   *   no session here.
   */
  current(instance: Instance): Promise<EngineSession> {
    return this.#availability.current(instance);
  }

  /** The open session of `instance` if one exists in this process (no creation). */
  existing(instanceId: string): EngineSession | undefined {
    return this.#table.get(instanceId);
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
    await this.#availability.whileConnecting(instance.id, session.connect());
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
    return sessionStatus(instance, this.#availability.stateOf(instance, this.#table.get(instance.id)));
  }

  /**
   * The current QR code of `instance` (docs/decisions/0016-session-lifecycle.md).
   * @throws DomainError conflict `already logged in` / `instance is not connected`.
   */
  pairingCode(instance: Instance): PairingCode {
    return currentPairingCode(instance, this.#table.get(instance.id));
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
      const connecting = this.#availability.whileConnecting(instanceId, session.connect());
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
    this.#table.shutdown();
    this.backlog.stop();
    this.#restorer.stop();
    await this.#table.closeAll();
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
    return this.#table.release(instanceId, options);
  }

  /**
   * Stops this process serving any instance, because another process took this node's id over
   * (docs/decisions/0008-leases-and-fencing.md, "Node identity"): that process renews the same leases and opens
   * the same sessions, so every session here is released fenced (its socket ended at once, its pending key writes
   * stopped), restore retries are dropped, and from now on no session is made: a call that would make one
   * ({@link session}, {@link restore}, {@link detached}) throws `reason`. Final. Never throws.
   */
  async fence(reason: DomainError): Promise<void> {
    this.#table.refuse(reason);
    this.#restorer.stop();
    await Promise.all(this.ids().map((id) => this.release(id, { fenced: true })));
  }

  /** Ids of the instances with a session in this process. */
  ids(): string[] {
    return this.#table.ids();
  }

  /** Number of sessions held in this process (metrics). */
  get size(): number {
    return this.#table.size;
  }
}
