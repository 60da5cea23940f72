import type { Environment } from '../domain/environment.ts';
import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { CloseOptions, Engine, EngineSession } from '../engines/engine.ts';
import type { LeaseFence } from '../store/leases.ts';
import type { RecordBacklog } from './backlog.ts';
import { createEngineSession } from './engine-session.ts';
import type { SessionManagerOptions } from './manager-options.ts';
import type { RecordRetryPolicy } from './record-retry.ts';

/** Where a session's fence comes from: the lease this node holds of an instance, if any (the lease keeper). */
export interface LeaseFences {
  /** The owner and token of this node's lease of `instanceId`, as of its last renewal or claim; undefined: none. */
  fenceOf(instanceId: string): LeaseFence | undefined;
}

/** What a {@link SessionTable} hands every session it makes, besides the manager's options. */
export interface SessionTableShared {
  /** Retry of a failed recording and of a credential read or write (docs/decisions/0011-store-faults.md). */
  policy: RecordRetryPolicy;
  /** The process's backlog of events waiting to be recorded. */
  backlog: RecordBacklog;
}

/**
 * The engine sessions of this process, one per instance (the session manager's, src/sessions/manager.ts): makes them
 * (the engine of their environment prepared first, {@link Engine.init}), keeps them by instance id, releases them
 * (several nodes, docs/decisions/0008-leases-and-fencing.md) and closes them at shutdown. Once {@link shutdown} began
 * or the process is {@link refuse}d, no session is made any more.
 */
export class SessionTable {
  readonly #options: SessionManagerOptions;
  readonly #shared: SessionTableShared;
  readonly #sessions = new Map<string, EngineSession>();
  /** The environments whose engine is prepared ({@link Engine.init} resolved). */
  readonly #prepared = new Set<Environment>();
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
  /** Why no session is made in this process any more ({@link refuse}); undefined while sessions may be made. */
  #fenced: DomainError | undefined;

  /** `options` are the session manager's; `shared` what it shares with every session (`SessionShared`). */
  constructor(options: SessionManagerOptions, shared: SessionTableShared) {
    this.#options = options;
    this.#shared = shared;
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

  /** The kept session of instance `instanceId`, if any (no creation). */
  get(instanceId: string): EngineSession | undefined {
    return this.#sessions.get(instanceId);
  }

  /** True when a session of instance `instanceId` is kept. */
  has(instanceId: string): boolean {
    return this.#sessions.has(instanceId);
  }

  /** Ids of the instances with a kept session. */
  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /** Number of kept sessions. */
  get size(): number {
    return this.#sessions.size;
  }

  /**
   * Once the engine of `instance` is prepared: its kept session (another call may have made it meanwhile), else a
   * new session object, kept when `keep` (in the same step as the check, so concurrent callers share one). A session
   * to keep is made only once the close of the instance's released one ended ({@link release}): that close may still
   * hold the one-socket lock, or record the events its socket received, in order before the new one's.
   * @throws as {@link #prepare}.
   */
  async keptOrNew(instance: Instance, keep: boolean): Promise<EngineSession> {
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
      policy: this.#shared.policy,
      signal: this.#closing.signal,
      released: released.signal,
      backlog: this.#shared.backlog,
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
   * @throws DomainError not_ready `server is shutting down` when {@link shutdown} began meanwhile, so no session is
   *   made after the others were closed; what preparing threw (logged here, at error level, for the live engine);
   *   the reason given to {@link refuse}.
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
   * From now on no session is made: {@link keptOrNew} throws `reason` (another process took this node's id over,
   * docs/decisions/0008-leases-and-fencing.md, "Node identity"). Final.
   */
  refuse(reason: DomainError): void {
    this.#fenced = reason;
  }

  /**
   * Closes and forgets the session of one instance, stored state untouched; see `SessionManager.release` for when
   * and why. A `fenced` release stops the session's credential writes first and ends its socket at once; a graceful
   * one stops them once the session closed. `reason` is what the stopped writes raise (default:
   * `SessionReleasedError`). Resolves once the close ended; a release of an instance whose close still runs resolves
   * with that close. Never throws; a close failure is logged.
   */
  release(instanceId: string, options: CloseOptions & { reason?: DomainError } = {}): Promise<void> {
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
   * Shutdown begins: the signal every session was given aborts (recordings and credential reads waiting for the
   * store make one last try and give up) and no session is made from now on. Final.
   */
  shutdown(): void {
    this.#closing.abort();
  }

  /** Closes every kept session and waits for them and for the closes of released ones. Never throws. */
  async closeAll(): Promise<void> {
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    this.#released.clear();
    await Promise.allSettled([...sessions.map((s) => s.close()), ...this.#releasing.values()]);
  }
}
