import type { AuthenticationCreds, ReachoutTimelockState } from 'baileys';
import { DomainError, SessionReleasedError } from '../../domain/errors.ts';
import type { ConnectionState, PairingCode } from '../../domain/messages.ts';
import type { CloseOptions } from '../engine.ts';
import { planAfterClose } from './after-close.ts';
import { isPaired } from './auth-state.ts';
import { decideClose, isPlatformRefusal } from './close-policy.ts';
import { Credentials } from './credentials.ts';
import { isBoom } from './errors.ts';
import { FirstAnswer } from './first-answer.ts';
import { type LifecycleOptions, QUIESCE_MS } from './lifecycle-options.ts';
import { connectionState, type Phase, qrLifetimeMs } from './phase.ts';
import { quiesce } from './quiesce.ts';
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
  #phase: Phase = 'idle';
  readonly #slot: SocketSlot;
  readonly #credentials: Credentials;
  #generation = 0;
  readonly #reconnects: Reconnects;
  #reason: string | undefined;
  /** The state's `cause` with {@link #reason}: set by a stop the platform caused by a takeover or a refusal. */
  #cause: ConnectionState['cause'];
  #qr: PairingCode | null = null;
  #qrCount = 0;
  readonly #gate = new FirstAnswer();
  #starting: Promise<void> | null = null;
  /**
   * The running {@link #starting}'s attempt: what cancelled it, once a teardown (or a logout, as it begins) did. The
   * first cancel is kept: the attempt's caller hears what ended it, not what came after (a disconnect's conflict,
   * not the 503 of a release that followed, which would tell its client to retry).
   */
  #attempt: StartAttempt | null = null;
  readonly #waiters = new Waiters();
  /**
   * True while the last connection state emitted was not recorded: it is emitted again at the next QR code and by a
   * connect while the connection is up (docs/decisions/0076-status-with-its-write.md: a state whose recording
   * failed is compared and reported again), so the session's status is not lost while its phase lasts.
   */
  #stateUnrecorded = false;
  /** The last reach-out timelock the platform reported (`connection.update.reachoutTimeLock`). */
  reachout: ReachoutTimelockState | undefined;

  constructor(options: LifecycleOptions) {
    this.#o = options;
    this.#reconnects = new Reconnects(options.version, options.fetchVersion, options.context.logger);
    this.#credentials = new Credentials(options.context.auth, options.baileysLogger, options.keyCache);
    this.#slot = new SocketSlot(options.context.logger);
  }

  /** The current phase. */
  get phase(): Phase {
    return this.#phase;
  }

  /** The socket when the connection is open (sends need it), else null. */
  get openSocket(): SocketLike | null {
    return this.#phase === 'open' ? this.#slot.current : null;
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
    return connectionState(this.#phase, this.creds, this.#credentials.paired, this.#reason, this.#cause);
  }

  /** The current QR code while pairing (docs/decisions/0016-session-lifecycle.md), else null. */
  pairingCode(): PairingCode | null {
    return this.#phase === 'pairing' ? this.#qr : null;
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
    if (this.#starting) {
      if (this.#attempt?.cancelled === undefined) return this.#starting;
      await this.#starting.catch(() => undefined);
      return this.connect();
    }
    if (this.#phase !== 'idle' && this.#phase !== 'stopped') {
      if (this.#stateUnrecorded) await this.#emitState();
      return;
    }
    const attempt: StartAttempt = { cancelled: undefined };
    this.#attempt = attempt;
    this.#starting = this.#start(attempt).finally(() => {
      this.#starting = null;
      if (this.#attempt === attempt) this.#attempt = null;
    });
    return this.#starting;
  }

  /** Resolves true once open and logged in, false after `timeoutMs` ms or when the attempt stops. */
  waitForLogin(timeoutMs: number): Promise<boolean> {
    return this.#waiters.wait(() => this.#phase === 'open' && this.state().loggedIn, timeoutMs);
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
    this.#cancelAttempt(cancelledBy('a logout'));
    if (sock) {
      try {
        await logoutWithin(sock, 5_000);
      } catch (error) {
        this.#o.context.logger.warn(
          { err: error },
          'unlinking on the platform failed; deleting credentials anyway',
        );
      }
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
   * still attached so their events are recorded, and starts no other ({@link quiesce}, at most
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
    if (sock && this.#phase === 'open' && options?.fenced !== true) {
      const quiet = await quiesce(sock, QUIESCE_MS);
      if (!quiet)
        this.#o.context.logger.warn(
          { waitedMs: QUIESCE_MS },
          'incoming messages were still being handled when the socket was closed',
        );
    }
    const fenced = options?.fenced === true;
    await this.#teardown('idle', this.#reason, this.#cause, new SessionReleasedError(), fenced);
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
   * The connection attempt `attempt` that {@link connect} started: lock, credentials, socket. A teardown while it
   * waits on the store (the lock's statements, the credentials' read) cancels it ({@link #cancelAttempt}); the attempt
   * then releases the lock it may have taken meanwhile and ends with the error of the first teardown that cancelled
   * it, opening nothing: the session may have been released (its lease lost,
   * docs/decisions/0008-leases-and-fencing.md), and a socket opened now would hold no lock and be reached by no fence;
   * after a logout, it would open on the deleted credentials.
   */
  async #start(attempt: StartAttempt): Promise<void> {
    const { lock } = this.#o;
    // A teardown still waiting for its socket to close would release the lock taken now.
    await this.#slot.handedOver;
    const taken = await lock.acquire();
    if (!taken.acquired) {
      throw new DomainError(
        'conflict',
        `instance is connected by another parley process (${taken.holder}); its lock expires at ${taken.expiresAt}`,
      );
    }
    if (attempt.cancelled !== undefined) {
      await lock.release();
      throw attempt.cancelled;
    }
    try {
      await this.#credentials.load();
    } catch (error) {
      await lock.release();
      throw attempt.cancelled ?? error;
    }
    if (attempt.cancelled !== undefined) {
      await lock.release();
      throw attempt.cancelled;
    }
    this.#reason = undefined;
    this.#cause = undefined;
    this.#reconnects.reset();
    this.#qrCount = 0;
    const seconds = this.#o.connectDeadlineMs / 1000;
    const first = this.#gate.start(this.#o.connectDeadlineMs, () => {
      const error = new DomainError(
        'platform_unreachable',
        `cannot reach the platform: no answer within ${seconds} s`,
      );
      this.#background(this.#failFirst(error, 'the platform did not answer in time'), 'connect deadline');
    });
    this.#open();
    await first;
  }

  #open(): void {
    const auth = this.#credentials.loaded;
    if (!auth) return;
    void this.#slot.end();
    this.#phase = 'connecting';
    const generation = ++this.#generation;
    let sock: SocketLike;
    try {
      sock = this.#o.socketFactory({
        ...this.#o.socketConfig(),
        auth: auth.state,
        logger: this.#o.baileysLogger,
        ...(this.#reconnects.version ? { version: this.#reconnects.version } : {}),
      });
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
    this.#qrCount += 1;
    this.#qr = { code, expiresAt: this.#o.context.clock() + qrLifetimeMs(this.#qrCount) };
    const entering = this.#phase !== 'pairing';
    this.#phase = 'pairing';
    this.#gate.settle();
    if (entering || this.#stateUnrecorded) this.#background(this.#emitState(), 'pairing started');
  }

  async #onOpen(): Promise<void> {
    this.#phase = 'open';
    this.#reconnects.opened();
    this.#qr = null;
    this.#reason = undefined;
    this.#cause = undefined;
    this.#o.context.logger.info({ jid: this.state().jid }, 'connected to the platform');
    this.#gate.settle();
    this.#waiters.wakeAll();
    await this.#emitState();
  }

  /**
   * Carries out what follows a close of the socket of `generation` (`planAfterClose`, after-close.ts). After the
   * version refresh a plan may wait for, nothing opens when the connection was ended meanwhile (a disconnect, a
   * logout, a close or a lost lock: the generation moved on, and the lock may be another process's by then).
   */
  async #closed(generation: number, error: unknown): Promise<void> {
    if (generation !== this.#generation) return;
    // Closed already: Baileys reports the close once its WebSocket is closed.
    void this.#slot.end();
    this.#reconnects.closed();
    const decision = decideClose(isBoom(error) ? error.output.statusCode : undefined);
    const { plan, refusals } = planAfterClose({
      decision,
      message: error instanceof Error ? error.message : 'connection closed',
      error,
      connecting: this.#gate.open,
      paired: this.creds ? isPaired(this.creds) : false,
      refusal: isPlatformRefusal(error),
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
        this.#phase = 'waiting';
        this.#cause = undefined;
        this.#reason = plan.reason;
        logger.warn({ code, action: decision.action, delayMs: plan.delayMs }, plan.reason);
        this.#reconnects.schedule(plan.delayMs, () => {
          if (this.#phase === 'waiting') this.#open();
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
    this.#cancelAttempt(cancel);
    this.#reconnects.cancel();
    const handOver = this.#slot.handOver(this.#o.lock, drop);
    this.#gate.take()?.reject(cancel);
    this.#phase = phase;
    this.#reason = reason;
    this.#cause = cause;
    this.#qr = null;
    this.#waiters.wakeAll();
    await handOver;
  }

  /**
   * Cancels the connection attempt still waiting on the store, if any, with `cancel`, unless an earlier teardown
   * already did ({@link #start} ends with the first).
   */
  #cancelAttempt(cancel: DomainError): void {
    if (this.#attempt !== null) this.#attempt.cancelled ??= cancel;
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
      this.#reason = `${this.#reason ?? 'stopped'} (deleting the stored credentials failed: retried at the next connect)`;
    }
  }

  /** Emits the current state; a failure is logged and sets {@link #stateUnrecorded}. */
  async #emitState(): Promise<void> {
    // Cleared as the state goes out, so that another emit while this one is recorded does not repeat it.
    this.#stateUnrecorded = false;
    try {
      await this.#o.context.emit({ type: 'connection', state: this.state() });
    } catch (error) {
      this.#stateUnrecorded = true;
      this.#o.context.logger.error({ err: error }, 'recording a connection state failed');
    }
  }
}

/** A connection attempt of {@link Lifecycle.connect}: what cancelled it first, once a teardown did. */
interface StartAttempt {
  cancelled: DomainError | undefined;
}

/** The error of a connection attempt that `what` (a disconnect, a logout, a lost lock) cancelled. */
function cancelledBy(what: string): DomainError {
  return new DomainError('conflict', `the connection attempt was cancelled by ${what}`);
}
