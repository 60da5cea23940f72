import type { AuthenticationCreds } from 'baileys';
import type { ConnectionState } from '../../domain/messages.ts';
import { isPaired } from './auth-state.ts';

/**
 * Where an instance's lifecycle is: `idle` (never connected, or disconnected), `connecting` (socket opening),
 * `pairing` (QR shown), `open`, `waiting` (reconnect backoff), `stopped` (a close the policy does not retry, or a
 * failed connect).
 */
export type Phase = 'idle' | 'connecting' | 'pairing' | 'open' | 'waiting' | 'stopped';

/**
 * How long the first QR code lives, ms (Baileys' default; docs/decisions/0016-session-lifecycle.md: 60 s, then 20 s
 * for each following one).
 */
export const FIRST_QR_MS = 60_000;
/** How long each QR code after the first lives, ms (see {@link FIRST_QR_MS}). */
export const NEXT_QR_MS = 20_000;

/** Lifetime of QR code number `index` (1-based) of one pairing attempt, ms. */
export function qrLifetimeMs(index: number): number {
  return index <= 1 ? FIRST_QR_MS : NEXT_QR_MS;
}

/**
 * The engine state (docs/api.md#session, docs/decisions/0016-session-lifecycle.md): `connected` while open or while
 * the QR attempt runs and nobody has scanned yet (once scanned, only when the logged-in socket is open), `loggedIn`
 * when paired credentials exist (`creds.account` signed by the phone), the
 * device-qualified JID and phone number from `creds.me`, and the reason of the last stop or the pending reconnect
 * with its `cause` when the platform replaced or refused the session
 * (docs/decisions/0012-session-and-message-status-events.md).
 * @param paired what the store said when no credentials are loaded.
 */
export function connectionState(
  phase: Phase,
  creds: AuthenticationCreds | null,
  paired: boolean,
  reason: string | undefined,
  cause?: ConnectionState['cause'],
): ConnectionState {
  const loggedIn = creds ? isPaired(creds) : paired;
  const jid = loggedIn ? (creds?.me?.id ?? null) : null;
  const state: ConnectionState = {
    // Pairing counts as connected until the scan: from then until the logged-in socket opens (the platform's restart
    // after pairing), the account is linked but nothing can be sent.
    connected: phase === 'open' || (phase === 'pairing' && !loggedIn),
    loggedIn,
    jid,
    phone: jid ? (jid.split('@')[0]?.split(':')[0] ?? null) : null,
    pushName: loggedIn ? (creds?.me?.name ?? null) : null,
  };
  if (reason) state.reason = reason;
  if (reason && cause) state.cause = cause;
  return state;
}
