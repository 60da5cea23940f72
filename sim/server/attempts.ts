/**
 * The record of connection attempts a simulator saw since it started (`GET /control/connections`): when each
 * WebSocket opened, what its client payload asked for (a login with stored credentials, or a registration that
 * wants a QR code) and whether a login succeeded. Reconnection tests and benchmarks read it to check that
 * clients come back spread over time (backoff with jitter) rather than all at once.
 */
import type { proto } from 'baileys';

/** Most attempts kept; older ones are dropped first. */
export const MAX_ATTEMPTS = 10_000;

/** One connection attempt. */
export interface ConnectionAttempt {
  /** The connection's number (as in the simulator's log lines). */
  connection: number;
  /** When the WebSocket opened, epoch ms. */
  at: number;
  /** `login` (stored credentials), `registration` (pairing), or `unknown` until the Noise handshake finished. */
  kind: 'login' | 'registration' | 'unknown';
  /** The account a login named (digits). */
  phone?: string;
  /** The device a login named. */
  device?: number;
  /** True once the login was accepted (`<success>` sent). */
  loggedIn: boolean;
}

/** Attempts in arrival order, at most {@link MAX_ATTEMPTS}. */
export class ConnectionLog {
  private readonly attempts: ConnectionAttempt[] = [];
  private readonly byConnection = new Map<number, ConnectionAttempt>();

  /** A WebSocket opened at `at` (epoch ms). */
  opened(connection: number, at: number): void {
    const attempt: ConnectionAttempt = { connection, at, kind: 'unknown', loggedIn: false };
    this.attempts.push(attempt);
    this.byConnection.set(connection, attempt);
    if (this.attempts.length > MAX_ATTEMPTS) {
      const dropped = this.attempts.shift();
      if (dropped) this.byConnection.delete(dropped.connection);
    }
  }

  /** The handshake finished with `payload`: a registration, or a login naming an account and device. */
  identified(connection: number, payload: proto.IClientPayload): void {
    const attempt = this.byConnection.get(connection);
    if (!attempt) return;
    if (payload.devicePairingData) {
      attempt.kind = 'registration';
      return;
    }
    attempt.kind = 'login';
    attempt.phone = String(payload.username ?? '');
    attempt.device = payload.device ?? 0;
  }

  /** The login on `connection` was accepted. */
  loggedIn(connection: number): void {
    const attempt = this.byConnection.get(connection);
    if (attempt) attempt.loggedIn = true;
  }

  /** Every attempt kept, oldest first (copies). */
  list(): ConnectionAttempt[] {
    return this.attempts.map((a) => ({ ...a }));
  }

  /** Forgets every attempt. */
  clear(): void {
    this.attempts.length = 0;
    this.byConnection.clear();
  }
}
