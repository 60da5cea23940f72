import type { AuthenticationCreds } from 'baileys';
import type { ConnectionState, PairingCode } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import { connectionState, type Phase, qrLifetimeMs } from './phase.ts';

/**
 * What a live session's lifecycle reports (lifecycle.ts `Lifecycle`, docs/decisions/0016-session-lifecycle.md): its
 * phase, the reason and cause of its last stop or pending reconnect, the current QR code and how many were shown in
 * the pairing attempt, and the emission of the engine state, which a state whose recording failed repeats
 * ({@link unrecorded}).
 */
export class ConnectionReport {
  /** Where the lifecycle is (phase.ts). */
  phase: Phase = 'idle';
  /** The reason of the last stop or of the pending reconnect, if any. */
  reason: string | undefined;
  /** The state's `cause` with {@link reason}: set by a stop the platform caused by a takeover or a refusal. */
  cause: ConnectionState['cause'];
  /**
   * True while the last connection state emitted was not recorded: it is emitted again at the next QR code and by a
   * connect while the connection is up (docs/decisions/0076-status-with-its-write.md: a state whose recording
   * failed is compared and reported again), so the session's status is not lost while its phase lasts.
   */
  unrecorded = false;
  #qr: PairingCode | null = null;
  #qrCount = 0;
  readonly #context: EngineSessionContext;

  /** @param context where the states are emitted ({@link emit}), its clock and logger. */
  constructor(context: EngineSessionContext) {
    this.#context = context;
  }

  /** The engine state (phase.ts `connectionState`) with `creds` loaded, or `paired` as the store said. */
  state(creds: AuthenticationCreds | null, paired: boolean): ConnectionState {
    return connectionState(this.phase, creds, paired, this.reason, this.cause);
  }

  /** The current QR code while pairing (docs/decisions/0016-session-lifecycle.md), else null. */
  pairingCode(): PairingCode | null {
    return this.phase === 'pairing' ? this.#qr : null;
  }

  /** A connect starts: no reason, no cause, and the QR codes counted anew. */
  starting(): void {
    this.reason = undefined;
    this.cause = undefined;
    this.#qrCount = 0;
  }

  /**
   * The platform showed QR code `code`: it is the current one, its lifetime by its rank (phase.ts `qrLifetimeMs`),
   * and the phase is `pairing`. @returns true when the phase was not `pairing` before.
   */
  qrShown(code: string): boolean {
    this.#qrCount += 1;
    this.#qr = { code, expiresAt: this.#context.clock() + qrLifetimeMs(this.#qrCount) };
    const entering = this.phase !== 'pairing';
    this.phase = 'pairing';
    return entering;
  }

  /** The connection opened: phase `open`, no QR code, reason or cause. */
  opened(): void {
    this.phase = 'open';
    this.#qr = null;
    this.reason = undefined;
    this.cause = undefined;
  }

  /** The connection ended in `phase` with `reason` and `cause`; the QR code is dropped. */
  ended(phase: Phase, reason: string | undefined, cause: ConnectionState['cause']): void {
    this.phase = phase;
    this.reason = reason;
    this.cause = cause;
    this.#qr = null;
  }

  /** Emits `state` as a `connection` event; a failure is logged and sets {@link unrecorded}. Never throws. */
  async emit(state: ConnectionState): Promise<void> {
    // Cleared as the state goes out, so that another emit while this one is recorded does not repeat it.
    this.unrecorded = false;
    try {
      await this.#context.emit({ type: 'connection', state });
    } catch (error) {
      this.unrecorded = true;
      this.#context.logger.error({ err: error }, 'recording a connection state failed');
    }
  }
}
