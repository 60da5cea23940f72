import type { AuthenticationCreds, ReachoutTimelockState } from 'baileys';
import { SessionReleasedError } from '../../domain/errors.ts';
import type { ConnectionState, PairingCode } from '../../domain/messages.ts';
import type { CloseOptions } from '../engine.ts';
import { planForClose } from './after-close.ts';
import { isPaired } from './auth-state.ts';
import {
  cancelledBy,
  noAnswerWithin,
  type StartAttempt,
  takeLockAndCredentials,
} from './connect-attempts.ts';
import { createSocket, type LifecycleOptions, QUIESCE_MS } from './lifecycle-options.ts';
import { LifecycleParts } from './lifecycle-parts.ts';
import type { Phase } from './phase.ts';
import { quiesceOrWarn } from './quiesce.ts';
import { logoutWithin, type SocketLike } from './socket.ts';

/**
 * One instance's socket lifecycle (docs/decisions/0025-live-engine.md): one socket at a time under the store lock, QR
 * rotation per docs/decisions/0016-session-lifecycle.md, the 515 restart after pairing as a new socket, and the
 * close-code policy of `close-policy.ts` (backoff 1–60 s, started over at the connect's first open and once a
 * connection stayed open `STABLE_OPEN_MS`). Events of a socket that was replaced or ended on purpose are ignored by
 * generation number, and a reconnect that waited on something (a version refresh) opens nothing once a disconnect, a
 * logout, a close or a lost lock ended the connection meanwhile. `connect()` is bounded: before the platform answered
 * once (QR or open), any close or the deadline rejects it (503 when unreachable) and leaves nothing running. This
 * class connects and handles each socket's events; its parts and the ways a connection ends (a teardown, a stop, a
 * failed connect) are lifecycle-parts.ts `LifecycleParts`.
 */
export class Lifecycle {
  /** The lifecycle's parts, and the ways its connection ends (lifecycle-parts.ts). */
  readonly #p: LifecycleParts;
  /** The last reach-out timelock the platform reported (`connection.update.reachoutTimeLock`). */
  reachout: ReachoutTimelockState | undefined;

  constructor(options: LifecycleOptions) {
    this.#p = new LifecycleParts(options);
  }

  /** The current phase. */
  get phase(): Phase {
    return this.#p.report.phase;
  }

  /** The socket when the connection is open (sends need it), else null. */
  get openSocket(): SocketLike | null {
    return this.#p.report.phase === 'open' ? this.#p.slot.current : null;
  }

  /** The current socket in any phase (pairing-code requests need it while pairing). */
  get socket(): SocketLike | null {
    return this.#p.slot.current;
  }

  /** The account's credentials while loaded (own JID, LID, push name). */
  get creds(): AuthenticationCreds | null {
    return this.#p.credentials.creds;
  }

  /**
   * Records the account's new push name in the loaded credentials and saves them ({@link Credentials.rename}).
   * @throws the store's error.
   */
  rename(name: string): Promise<void> {
    return this.#p.credentials.rename(name);
  }

  /** The engine state (see `connectionState`); synchronous. */
  state(): ConnectionState {
    return this.#p.state();
  }

  /** The current QR code while pairing (docs/decisions/0016-session-lifecycle.md), else null. */
  pairingCode(): PairingCode | null {
    return this.#p.report.pairingCode();
  }

  /** Reads whether paired credentials exist, once, without opening anything (so states emitted are right). */
  async loadSummary(): Promise<void> {
    await this.#p.credentials.summarise();
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
    const running = this.#p.attempts.running;
    if (running) {
      if (!running.cancelled) return running.done;
      await running.done.catch(() => undefined);
      return this.connect();
    }
    const { phase } = this.#p.report;
    if (phase !== 'idle' && phase !== 'stopped') {
      if (this.#p.report.unrecorded) await this.#p.emitState();
      return;
    }
    return this.#p.attempts.start((attempt) => this.#start(attempt));
  }

  /** Resolves true once open and logged in, false after `timeoutMs` ms or when the attempt stops. */
  waitForLogin(timeoutMs: number): Promise<boolean> {
    return this.#p.waiters.wait(() => this.#p.report.phase === 'open' && this.state().loggedIn, timeoutMs);
  }

  /** Ends the socket, keeps the credentials (docs/api.md#session: disconnect). */
  async disconnect(): Promise<void> {
    await this.loadSummary();
    await this.#p.teardown('idle', undefined);
    await this.#p.emitState();
  }

  /** Unlinks the device when connected, then deletes every stored credential (docs/api.md#session: logout). */
  async logout(): Promise<void> {
    const sock = this.openSocket;
    this.#p.generation += 1;
    this.#p.attempts.cancel(cancelledBy('a logout'));
    if (sock) {
      await logoutWithin(sock, 5_000).catch((error: unknown) => {
        this.#p.options.context.logger.warn(
          { err: error },
          'unlinking on the platform failed; deleting credentials anyway',
        );
      });
    }
    await this.#p.teardown('idle', undefined, undefined, cancelledBy('a logout'));
    try {
      await this.#p.credentials.wipe();
    } finally {
      await this.#p.emitState();
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
    this.#p.generation += 1;
    const sock = this.#p.slot.current;
    if (sock && this.#p.report.phase === 'open' && options?.fenced !== true) {
      await quiesceOrWarn(sock, QUIESCE_MS, this.#p.options.context.logger);
    }
    const fenced = options?.fenced === true;
    const { reason, cause } = this.#p.report;
    await this.#p.teardown('idle', reason, cause, new SessionReleasedError(), fenced);
  }

  /** Stops because the store lock was lost (another process took over, or it expired). */
  async lockLost(reason: string): Promise<void> {
    this.#p.options.context.logger.warn({ reason }, 'one-socket lock lost; closing the socket');
    await this.#p.teardown('stopped', reason, undefined, cancelledBy(`a lost lock (${reason})`));
    // The lock may be lost while the credentials still load (a long store outage): the state emitted must not say
    // "not logged in" for an account whose credentials are kept (that would read as a logout, which cancels the
    // instance's pending sends). Read whether they exist first; when even that fails, emit nothing: the process now
    // holding the instance reports its session.
    try {
      await this.loadSummary();
    } catch (error) {
      this.#p.options.context.logger.warn(
        { err: error },
        'reading the stored credentials failed; no state emitted',
      );
      return;
    }
    await this.#p.emitState();
  }

  /**
   * The connection attempt `attempt` that {@link connect} started: lock, credentials (connect-attempts.ts
   * `takeLockAndCredentials`), socket. A teardown while it waits on the store (the lock's statements, the credentials'
   * read) cancels it (connect-attempts.ts `ConnectAttempts.cancel`); the attempt then releases the lock it may have taken meanwhile
   * and ends with the error of the first teardown that cancelled it, opening nothing: the session may have been
   * released (its lease lost, docs/decisions/0008-leases-and-fencing.md), and a socket opened now would hold no lock
   * and be reached by no fence; after a logout, it would open on the deleted credentials.
   */
  async #start(attempt: StartAttempt): Promise<void> {
    // A teardown still waiting for its socket to close would release the lock taken now.
    await this.#p.slot.handedOver;
    await takeLockAndCredentials(attempt, this.#p.options.lock, () => this.#p.credentials.load());
    this.#p.report.starting();
    this.#p.reconnects.reset();
    const deadlineMs = this.#p.options.connectDeadlineMs;
    const first = this.#p.gate.start(deadlineMs, () => {
      const error = noAnswerWithin(deadlineMs);
      this.#p.background(this.#p.failFirst(error, 'the platform did not answer in time'), 'connect deadline');
    });
    this.#open();
    await first;
  }

  /** Opens a new socket on the loaded credentials, as the current generation, with the lifecycle's listeners. */
  #open(): void {
    const auth = this.#p.credentials.loaded;
    if (!auth) return;
    void this.#p.slot.end();
    this.#p.report.phase = 'connecting';
    const generation = ++this.#p.generation;
    let sock: SocketLike;
    try {
      sock = createSocket(this.#p.options, auth.state, this.#p.reconnects.version);
    } catch (error) {
      this.#p.background(this.#closed(generation, error), 'socket creation failed');
      return;
    }
    this.#p.slot.hold(sock, this.#p.options.attach, {
      connection: (u) => {
        if (generation !== this.#p.generation) return;
        if (u.reachoutTimeLock) this.reachout = u.reachoutTimeLock;
        if (u.qr) this.#onQr(u.qr);
        if (u.connection === 'open') this.#p.background(this.#onOpen(), 'connection open');
        if (u.connection === 'close')
          this.#p.background(this.#closed(generation, u.lastDisconnect?.error), 'connection close');
      },
      creds: () => {
        auth.saveCreds().catch((error: unknown) => {
          this.#p.options.context.logger.error({ err: error }, 'saving platform credentials failed');
        });
      },
    });
  }

  /** A QR code shown: the connect's first answer; the state is emitted when pairing began (or was unrecorded). */
  #onQr(code: string): void {
    const entering = this.#p.report.qrShown(code);
    this.#p.gate.settle();
    if (entering || this.#p.report.unrecorded) this.#p.background(this.#p.emitState(), 'pairing started');
  }

  /** The connection opened: the connect's first answer; login waiters are woken and the state emitted. */
  async #onOpen(): Promise<void> {
    this.#p.report.opened();
    this.#p.reconnects.opened();
    this.#p.options.context.logger.info({ jid: this.state().jid }, 'connected to the platform');
    this.#p.gate.settle();
    this.#p.waiters.wakeAll();
    await this.#p.emitState();
  }

  /**
   * Carries out what follows a close of the socket of `generation` (`planForClose`, after-close.ts). After the
   * version refresh a plan may wait for, nothing opens when the connection was ended meanwhile (a disconnect, a
   * logout, a close or a lost lock: the generation moved on, and the lock may be another process's by then).
   */
  async #closed(generation: number, error: unknown): Promise<void> {
    if (generation !== this.#p.generation) return;
    // Closed already: Baileys reports the close once its WebSocket is closed.
    void this.#p.slot.end();
    this.#p.reconnects.closed();
    const { decision, plan, refusals } = planForClose(error, {
      connecting: this.#p.gate.open,
      paired: this.creds ? isPaired(this.creds) : false,
      refusals: this.#p.reconnects.refusals,
      refusalLimit: this.#p.options.loginRefusalLimit,
      refreshes: this.#p.reconnects.refreshes,
      attempt: this.#p.reconnects.attempt,
      random: this.#p.options.random,
    });
    this.#p.reconnects.refusals = refusals;
    const { logger } = this.#p.options.context;
    const { code } = decision;
    switch (plan.kind) {
      case 'reopen':
        logger.info({ code }, decision.reason);
        if (plan.refreshVersion) await this.#p.reconnects.refreshVersion();
        if (generation !== this.#p.generation) return;
        if (this.#p.gate.open) this.#open();
        return;
      case 'fail-connect':
        await this.#p.failFirst(plan.failure, plan.failure.message, {
          wipe: plan.wipe,
          ...(plan.cause ? { cause: plan.cause } : {}),
        });
        return;
      case 'stop':
        logger.warn({ code, action: plan.wipe ? 'wipe' : 'stop', refusals }, plan.reason);
        await this.#p.stop(plan.reason, plan.wipe, plan.cause);
        return;
      case 'retry':
        // Waiting from the close on, the version refresh included: the socket is gone, and the session comes back by
        // itself (an open phase meanwhile reported it connected and answered calls with a 409).
        this.#p.report.phase = 'waiting';
        this.#p.report.cause = undefined;
        this.#p.report.reason = plan.reason;
        if (plan.refreshVersion) await this.#p.reconnects.refreshVersion();
        if (generation !== this.#p.generation) return;
        logger.warn({ code, action: decision.action, delayMs: plan.delayMs }, plan.reason);
        this.#p.reconnects.schedule(plan.delayMs, () => {
          if (this.#p.report.phase === 'waiting') this.#open();
        });
        await this.#p.emitState();
    }
  }
}
