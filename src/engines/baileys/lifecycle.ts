import type { AuthenticationCreds, ReachoutTimelockState } from 'baileys';
import { type DomainError, SessionReleasedError } from '../../domain/errors.ts';
import type { ConnectionState, PairingCode } from '../../domain/messages.ts';
import type { CloseOptions } from '../engine.ts';
import { planForClose } from './after-close.ts';
import { isPaired } from './auth-state.ts';
import {
  ConnectAttempts,
  cancelledBy,
  noAnswerWithin,
  type StartAttempt,
  takeLockAndCredentials,
} from './connect-attempts.ts';
import { ConnectionReport } from './connection-report.ts';
import { Credentials } from './credentials.ts';
import { FirstAnswer } from './first-answer.ts';
import { createSocket, type LifecycleOptions, QUIESCE_MS } from './lifecycle-options.ts';
import type { Phase } from './phase.ts';
import { quiesceOrWarn } from './quiesce.ts';
import { Reconnects } from './reconnects.ts';
import { logoutWithin, type SocketLike } from './socket.ts';
import { SocketSlot } from './socket-slot.ts';
import { Waiters } from './waiters.ts';

/**
 * One instance's socket lifecycle (docs/decisions/0025-live-engine.md): one socket at a time under the store lock, QR
 * rotation per docs/decisions/0016-session-lifecycle.md, the 515 restart after pairing as a new socket, and the
 * close-code policy of `close-policy.ts` (backoff 1–60 s, started over at the connect's first open and once a
 * connection stayed open `STABLE_OPEN_MS`). Events of a socket that was replaced or ended on purpose are ignored by
 * generation number, and a reconnect that waited on something (a version refresh) opens nothing once a disconnect, a
 * logout, a close or a lost lock ended the connection meanwhile. `connect()` is bounded: before the platform answered
 * once (QR or open), any close or the deadline rejects it (503 when unreachable) and leaves nothing running.
 */
export class Lifecycle {
  readonly #o: LifecycleOptions;
  /** The phase, the reason and cause of the last stop, the QR code, and the states emitted. */
  readonly #report: ConnectionReport;
  readonly #slot: SocketSlot;
  readonly #credentials: Credentials;
  #generation = 0;
  readonly #reconnects: Reconnects;
  readonly #gate = new FirstAnswer();
  /** The one connection attempt at a time, and what cancelled it (connect-attempts.ts). */
  readonly #attempts = new ConnectAttempts();
  readonly #waiters = new Waiters();
  /** The last reach-out timelock the platform reported (`connection.update.reachoutTimeLock`). */
  reachout: ReachoutTimelockState | undefined;

  constructor(options: LifecycleOptions) {
    this.#o = options;
    this.#reconnects = new Reconnects(options.version, options.fetchVersion, options.context.logger);
    this.#credentials = new Credentials(options.context.auth, options.baileysLogger, options.keyCache);
    this.#slot = new SocketSlot(options.context.logger);
    this.#report = new ConnectionReport(options.context);
  }

  /** The current phase. */
  get phase(): Phase {
    return this.#report.phase;
  }

  /** The socket when the connection is open (sends need it), else null. */
  get openSocket(): SocketLike | null {
    return this.#report.phase === 'open' ? this.#slot.current : null;
  }

  /** The current socket in any phase (pairing-code requests need it while pairing). */
  get socket(): SocketLike | null {
    return this.#slot.current;
  }

  /** The account's credentials while loaded (own JID, LID, push name). */
  get creds(): AuthenticationCreds | null {
    return this.#credentials.creds;
  }

  /**
   * Records the account's new push name in the loaded credentials and saves them ({@link Credentials.rename}).
   * @throws the store's error.
   */
  rename(name: string): Promise<void> {
    return this.#credentials.rename(name);
  }

  /** The engine state (see `connectionState`); synchronous. */
  state(): ConnectionState {
    return this.#report.state(this.creds, this.#credentials.paired);
  }

  /** The current QR code while pairing (docs/decisions/0016-session-lifecycle.md), else null. */
  pairingCode(): PairingCode | null {
    return this.#report.pairingCode();
  }

  /** Reads whether paired credentials exist, once, without opening anything (so states emitted are right). */
  async loadSummary(): Promise<void> {
    await this.#credentials.summarise();
  }

  /**
   * Starts a connection: takes the lock, loads the credentials, opens a socket and resolves once the platform
   * answered (QR or open). Idempotent while an attempt runs or the connection is up, but for a state whose recording
   * failed: that connect records it. An attempt a close, disconnect, logout or lost lock cancelled while it still
   * waited on the store opens nothing; a connect made after that cancel waits for it to end, then starts anew.
   * @throws DomainError conflict when another process holds the lock, or when a disconnect, logout or lost lock
   *   cancelled the attempt; SessionReleasedError (503) when a close did ({@link close}: the session was released,
   *   docs/decisions/0008-leases-and-fencing.md), of several the first one's (docs/decisions/0025-live-engine.md);
   *   platform_unreachable (503) when the platform cannot be reached or did not answer within the deadline;
   *   platform_refused (502) for a refusal (close codes).
   */
  async connect(): Promise<void> {
    const running = this.#attempts.running;
    if (running) {
      if (!running.cancelled) return running.done;
      await running.done.catch(() => undefined);
      return this.connect();
    }
    const { phase } = this.#report;
    if (phase !== 'idle' && phase !== 'stopped') {
      if (this.#report.unrecorded) await this.#emitState();
      return;
    }
    return this.#attempts.start((attempt) => this.#start(attempt));
  }

  /** Resolves true once open and logged in, false after `timeoutMs` ms or when the attempt stops. */
  waitForLogin(timeoutMs: number): Promise<boolean> {
    return this.#waiters.wait(() => this.#report.phase === 'open' && this.state().loggedIn, timeoutMs);
  }

  /** Ends the socket, keeps the credentials (docs/api.md#session: disconnect). */
  async disconnect(): Promise<void> {
    await this.loadSummary();
    await this.#teardown('idle', undefined);
    await this.#emitState();
  }

  /** Unlinks the device when connected, then deletes every stored credential (docs/api.md#session: logout). */
  async logout(): Promise<void> {
    const sock = this.openSocket;
    this.#generation += 1;
    this.#attempts.cancel(cancelledBy('a logout'));
    if (sock) {
      await logoutWithin(sock, 5_000).catch((error: unknown) => {
        this.#o.context.logger.warn(
          { err: error },
          'unlinking on the platform failed; deleting credentials anyway',
        );
      });
    }
    await this.#teardown('idle', undefined, undefined, cancelledBy('a logout'));
    try {
      await this.#credentials.wipe();
    } finally {
      await this.#emitState();
    }
  }

  /**
   * Shutdown or hand-over to another node: lets the incoming stanzas being handled finish, with the listeners
   * still attached so their events are recorded, and starts no other (quiesce.ts `quiesce`, at most
   * {@link QUIESCE_MS}); then ends the socket and releases the lock without changing anything stored or emitting.
   * `fenced` (the instance's lease is lost or about to expire, docs/decisions/0008-leases-and-fencing.md) ends the
   * socket at once, with no closing handshake: with the store unreachable the quiescing would spend its whole
   * {@link QUIESCE_MS} while another node may open its own socket once the lease expires. A connect still waiting
   * on the store ends with SessionReleasedError and opens nothing. Nothing the platform does meanwhile reconnects: a
   * close during the quiescing ends the connection, as the close would.
   */
  async close(options?: CloseOptions): Promise<void> {
    // The socket's events are ignored from now on (its stanzas' events are not: the listeners stay attached). A
    // close the platform sends while the stanzas finish would otherwise open a new socket, which would take stanzas
    // from the platform only to be cut below without quiescing.
    this.#generation += 1;
    const sock = this.#slot.current;
    if (sock && this.#report.phase === 'open' && options?.fenced !== true) {
      await quiesceOrWarn(sock, QUIESCE_MS, this.#o.context.logger);
    }
    const fenced = options?.fenced === true;
    const { reason, cause } = this.#report;
    await this.#teardown('idle', reason, cause, new SessionReleasedError(), fenced);
  }

  /** Stops because the store lock was lost (another process took over, or it expired). */
  async lockLost(reason: string): Promise<void> {
    this.#o.context.logger.warn({ reason }, 'one-socket lock lost; closing the socket');
    await this.#teardown('stopped', reason, undefined, cancelledBy(`a lost lock (${reason})`));
    // The lock may be lost while the credentials still load (a long store outage): the state emitted must not say
    // "not logged in" for an account whose credentials are kept (that would read as a logout, which cancels the
    // instance's pending sends). Read whether they exist first; when even that fails, emit nothing: the process now
    // holding the instance reports its session.
    try {
      await this.loadSummary();
    } catch (error) {
      this.#o.context.logger.warn({ err: error }, 'reading the stored credentials failed; no state emitted');
      return;
    }
    await this.#emitState();
  }

  /**
   * The connection attempt `attempt` that {@link connect} started: lock, credentials (connect-attempts.ts
   * `takeLockAndCredentials`), socket. A teardown while it waits on the store (the lock's statements, the credentials'
   * read) cancels it ({@link ConnectAttempts.cancel}); the attempt then releases the lock it may have taken meanwhile
   * and ends with the error of the first teardown that cancelled it, opening nothing: the session may have been
   * released (its lease lost, docs/decisions/0008-leases-and-fencing.md), and a socket opened now would hold no lock
   * and be reached by no fence; after a logout, it would open on the deleted credentials.
   */
  async #start(attempt: StartAttempt): Promise<void> {
    // A teardown still waiting for its socket to close would release the lock taken now.
    await this.#slot.handedOver;
    await takeLockAndCredentials(attempt, this.#o.lock, () => this.#credentials.load());
    this.#report.starting();
    this.#reconnects.reset();
    const deadlineMs = this.#o.connectDeadlineMs;
    const first = this.#gate.start(deadlineMs, () => {
      const error = noAnswerWithin(deadlineMs);
      this.#background(this.#failFirst(error, 'the platform did not answer in time'), 'connect deadline');
    });
    this.#open();
    await first;
  }

  #open(): void {
    const auth = this.#credentials.loaded;
    if (!auth) return;
    void this.#slot.end();
    this.#report.phase = 'connecting';
    const generation = ++this.#generation;
    let sock: SocketLike;
    try {
      sock = createSocket(this.#o, auth.state, this.#reconnects.version);
    } catch (error) {
      this.#background(this.#closed(generation, error), 'socket creation failed');
      return;
    }
    this.#slot.hold(sock, this.#o.attach, {
      connection: (u) => {
        if (generation !== this.#generation) return;
        if (u.reachoutTimeLock) this.reachout = u.reachoutTimeLock;
        if (u.qr) this.#onQr(u.qr);
        if (u.connection === 'open') this.#background(this.#onOpen(), 'connection open');
        if (u.connection === 'close')
          this.#background(this.#closed(generation, u.lastDisconnect?.error), 'connection close');
      },
      creds: () => {
        auth.saveCreds().catch((error: unknown) => {
          this.#o.context.logger.error({ err: error }, 'saving platform credentials failed');
        });
      },
    });
  }

  #onQr(code: string): void {
    const entering = this.#report.qrShown(code);
    this.#gate.settle();
    if (entering || this.#report.unrecorded) this.#background(this.#emitState(), 'pairing started');
  }

  async #onOpen(): Promise<void> {
    this.#report.opened();
    this.#reconnects.opened();
    this.#o.context.logger.info({ jid: this.state().jid }, 'connected to the platform');
    this.#gate.settle();
    this.#waiters.wakeAll();
    await this.#emitState();
  }

  /**
   * Carries out what follows a close of the socket of `generation` (`planForClose`, after-close.ts). After the
   * version refresh a plan may wait for, nothing opens when the connection was ended meanwhile (a disconnect, a
   * logout, a close or a lost lock: the generation moved on, and the lock may be another process's by then).
   */
  async #closed(generation: number, error: unknown): Promise<void> {
    if (generation !== this.#generation) return;
    // Closed already: Baileys reports the close once its WebSocket is closed.
    void this.#slot.end();
    this.#reconnects.closed();
    const { decision, plan, refusals } = planForClose(error, {
      connecting: this.#gate.open,
      paired: this.creds ? isPaired(this.creds) : false,
      refusals: this.#reconnects.refusals,
      refusalLimit: this.#o.loginRefusalLimit,
      refreshes: this.#reconnects.refreshes,
      attempt: this.#reconnects.attempt,
      random: this.#o.random,
    });
    this.#reconnects.refusals = refusals;
    const { logger } = this.#o.context;
    const { code } = decision;
    switch (plan.kind) {
      case 'reopen':
        logger.info({ code }, decision.reason);
        if (plan.refreshVersion) await this.#reconnects.refreshVersion();
        if (generation !== this.#generation) return;
        if (this.#gate.open) this.#open();
        return;
      case 'fail-connect':
        await this.#failFirst(plan.failure, plan.failure.message, {
          wipe: plan.wipe,
          ...(plan.cause ? { cause: plan.cause } : {}),
        });
        return;
      case 'stop':
        logger.warn({ code, action: plan.wipe ? 'wipe' : 'stop', refusals }, plan.reason);
        await this.#stop(plan.reason, plan.wipe, plan.cause);
        return;
      case 'retry':
        if (plan.refreshVersion) await this.#reconnects.refreshVersion();
        if (generation !== this.#generation) return;
        this.#report.phase = 'waiting';
        this.#report.cause = undefined;
        this.#report.reason = plan.reason;
        logger.warn({ code, action: decision.action, delayMs: plan.delayMs }, plan.reason);
        this.#reconnects.schedule(plan.delayMs, () => {
          if (this.#report.phase === 'waiting') this.#open();
        });
        await this.#emitState();
    }
  }

  async #failFirst(
    error: unknown,
    reason: string,
    options: { wipe?: boolean; cause?: ConnectionState['cause'] } = {},
  ): Promise<void> {
    const pending = this.#gate.take();
    if (!pending) return;
    this.#o.context.logger.warn({ err: error }, `connect failed: ${reason}`);
    await this.#teardown('stopped', reason, options.cause);
    if (options.wipe) await this.#wipeOrLog();
    pending.reject(error);
    await this.#emitState();
  }

  /**
   * Stops with `reason` and `cause` (and deletes the credentials when `wipe`), then reports the state. Never throws
   * for the wipe.
   */
  async #stop(reason: string, wipe = false, cause?: ConnectionState['cause']): Promise<void> {
    await this.#teardown('stopped', reason, cause);
    if (wipe) await this.#wipeOrLog();
    await this.#emitState();
  }

  /**
   * Runs a platform-driven task nobody awaits (socket events, timers): a rejection is logged at error level,
   * never left unhandled (Node would end the process, and every instance with it).
   */
  #background(task: Promise<void>, what: string): void {
    task.catch((error: unknown) => {
      this.#o.context.logger.error({ err: error, during: what }, 'handling a connection change failed');
    });
  }

  /**
   * Ends the socket (its events are ignored from now on), cancels timers and waiters, releases the lock once the
   * socket is closed ({@link SocketSlot.handOver}; `drop`: at once, no closing handshake). A connection attempt under
   * way ends with `cancel` (default: conflict, cancelled by a disconnect), whether it waits for the platform's first
   * answer or still on the store ({@link #start}).
   */
  async #teardown(
    phase: Phase,
    reason: string | undefined,
    cause?: ConnectionState['cause'],
    cancel: DomainError = cancelledBy('a disconnect'),
    drop = false,
  ): Promise<void> {
    this.#generation += 1;
    this.#attempts.cancel(cancel);
    this.#reconnects.cancel();
    const handOver = this.#slot.handOver(this.#o.lock, drop);
    this.#gate.take()?.reject(cancel);
    this.#report.ended(phase, reason, cause);
    this.#waiters.wakeAll();
    await handOver;
  }

  /** Deletes the credentials on a platform-driven path: a failure is logged and named in the stop reason. */
  async #wipeOrLog(): Promise<void> {
    try {
      await this.#credentials.wipe();
    } catch (error) {
      this.#o.context.logger.error(
        { err: error },
        'deleting the stored platform credentials failed; they are deleted before the next connect',
      );
      const reason = this.#report.reason ?? 'stopped';
      this.#report.reason = `${reason} (deleting the stored credentials failed: retried at the next connect)`;
    }
  }

  /**
   * Emits the current state; a failure is logged and marks it unrecorded (connection-report.ts
   * `ConnectionReport.emit`).
   */
  #emitState(): Promise<void> {
    return this.#report.emit(this.state());
  }
}
