import type { DomainError } from '../../domain/errors.ts';
import type { ConnectionState } from '../../domain/messages.ts';
import { ConnectAttempts, cancelledBy } from './connect-attempts.ts';
import { ConnectionReport } from './connection-report.ts';
import { Credentials } from './credentials.ts';
import { FirstAnswer } from './first-answer.ts';
import type { LifecycleOptions } from './lifecycle-options.ts';
import type { Phase } from './phase.ts';
import { Reconnects } from './reconnects.ts';
import { SocketSlot } from './socket-slot.ts';
import { Waiters } from './waiters.ts';

/**
 * The parts of one instance's socket lifecycle (lifecycle.ts `Lifecycle`, docs/decisions/0025-live-engine.md) and
 * the ways its connection ends: a teardown (the socket ended, the lock released once it closed), a stop with a
 * reason, and a connect that failed before the platform answered once. The lifecycle opens connections and handles
 * their sockets' events; every path that ends one (a disconnect, a logout, a close, a lost lock, a refusal, the
 * connect's deadline) goes through {@link teardown}.
 */
export class LifecycleParts {
  /** Everything the lifecycle needs from the engine and the session (lifecycle-options.ts). */
  readonly options: LifecycleOptions;
  /** The phase, the reason and cause of the last stop, the QR code, and the states emitted (connection-report.ts). */
  readonly report: ConnectionReport;
  /** The one socket at a time, and the lock's release once it closed (socket-slot.ts). */
  readonly slot: SocketSlot;
  /** The account's credentials, loaded, saved and deleted through the auth store (credentials.ts). */
  readonly credentials: Credentials;
  /** The reconnect's backoff, refusals in a row and the platform version (reconnects.ts). */
  readonly reconnects: Reconnects;
  /** The gate of the running `connect()`: open until the platform answered once (first-answer.ts). */
  readonly gate = new FirstAnswer();
  /** The one connection attempt at a time, and what cancelled it (connect-attempts.ts). */
  readonly attempts = new ConnectAttempts();
  /** Callers waiting for a login (waiters.ts). */
  readonly waiters = new Waiters();
  /**
   * The generation of the current socket: moved on by every new socket and every end, so the events of a socket
   * that was replaced or ended on purpose, and a reconnect that waited on something meanwhile, are ignored.
   */
  generation = 0;

  constructor(options: LifecycleOptions) {
    this.options = options;
    this.reconnects = new Reconnects(options.version, options.fetchVersion, options.context.logger);
    this.credentials = new Credentials(options.context.auth, options.baileysLogger, options.keyCache);
    this.slot = new SocketSlot(options.context.logger);
    this.report = new ConnectionReport(options.context);
  }

  /** The engine state (phase.ts `connectionState`) with the credentials loaded, or as the store said; synchronous. */
  state(): ConnectionState {
    return this.report.state(this.credentials.creds, this.credentials.paired);
  }

  /**
   * Emits the current state; a failure is logged and marks it unrecorded (connection-report.ts
   * `ConnectionReport.emit`). Never throws.
   */
  emitState(): Promise<void> {
    return this.report.emit(this.state());
  }

  /**
   * Runs a platform-driven task nobody awaits (socket events, timers): a rejection is logged at error level,
   * never left unhandled (Node would end the process, and every instance with it).
   */
  background(task: Promise<void>, what: string): void {
    task.catch((error: unknown) => {
      this.options.context.logger.error({ err: error, during: what }, 'handling a connection change failed');
    });
  }

  /**
   * Ends the socket (its events are ignored from now on), cancels timers and waiters, releases the lock once the
   * socket is closed ({@link SocketSlot.handOver}; `drop`: at once, no closing handshake), and enters `phase` with
   * `reason` and `cause`. A connection attempt under way ends with `cancel` (default: conflict, cancelled by a
   * disconnect), whether it waits for the platform's first answer or still on the store (lifecycle.ts
   * `Lifecycle.#start`). Resolves once the lock is released.
   */
  async teardown(
    phase: Phase,
    reason: string | undefined,
    cause?: ConnectionState['cause'],
    cancel: DomainError = cancelledBy('a disconnect'),
    drop = false,
  ): Promise<void> {
    this.generation += 1;
    this.attempts.cancel(cancel);
    this.reconnects.cancel();
    const handOver = this.slot.handOver(this.options.lock, drop);
    this.gate.take()?.reject(cancel);
    this.report.ended(phase, reason, cause);
    this.waiters.wakeAll();
    await handOver;
  }

  /**
   * Stops with `reason` and `cause` (and deletes the credentials when `wipe`), then reports the state. Never throws
   * for the wipe ({@link wipeOrLog}).
   */
  async stop(reason: string, wipe = false, cause?: ConnectionState['cause']): Promise<void> {
    await this.teardown('stopped', reason, cause);
    if (wipe) await this.wipeOrLog();
    await this.emitState();
  }

  /**
   * Fails the running `connect()` with `error` before the platform answered once: stops with `reason` (and
   * `options.cause`; deletes the credentials when `options.wipe`), rejects the connect, then reports the state.
   * No-op when no connect waits for its first answer.
   */
  async failFirst(
    error: unknown,
    reason: string,
    options: { wipe?: boolean; cause?: ConnectionState['cause'] } = {},
  ): Promise<void> {
    const pending = this.gate.take();
    if (!pending) return;
    this.options.context.logger.warn({ err: error }, `connect failed: ${reason}`);
    await this.teardown('stopped', reason, options.cause);
    if (options.wipe) await this.wipeOrLog();
    pending.reject(error);
    await this.emitState();
  }

  /**
   * Deletes the credentials on a platform-driven path: a failure is logged and named in the stop reason (they are
   * deleted before the next connect). Never throws.
   */
  async wipeOrLog(): Promise<void> {
    try {
      await this.credentials.wipe();
    } catch (error) {
      this.options.context.logger.error(
        { err: error },
        'deleting the stored platform credentials failed; they are deleted before the next connect',
      );
      const reason = this.report.reason ?? 'stopped';
      this.report.reason = `${reason} (deleting the stored credentials failed: retried at the next connect)`;
    }
  }
}
