import { DomainError } from '../../domain/errors.ts';
import type { ConnectionState } from '../../domain/messages.ts';
import { isBoom } from './errors.ts';

/**
 * What the live engine does when the platform closes its socket (docs/decisions/0025-live-engine.md): one row per
 * close code. Codes are Baileys' `DisconnectReason` values and the platform's `<failure reason>` /
 * `<stream:error code>` numbers.
 */
export type CloseActionKind =
  /** Delete the stored credentials and stop (the device was unlinked). */
  | 'wipe'
  /** Stop and report; credentials are kept, nothing reconnects until `connect` is called again. */
  | 'stop'
  /** Fetch the platform's current client version, then open a new socket. */
  | 'refresh-version'
  /** Open a new socket after {@link backoffDelayMs}. */
  | 'reconnect';

/** One row of {@link CLOSE_POLICY}. */
export interface ClosePolicyRow {
  code: number;
  action: CloseActionKind;
  /** What the status endpoint (`reason`) and the log line say. */
  reason: string;
  /** The connection state's `cause` after this stop: another client took over, or the account is refused. */
  cause?: ConnectionState['cause'];
}

/** The decision for one close. */
export interface CloseDecision {
  code: number;
  action: CloseActionKind;
  reason: string;
  cause?: ConnectionState['cause'];
}

/**
 * The close-code table (docs/decisions/0025-live-engine.md). 401 wipe and stop; 402/403/406/411 stop and report
 * (402/403 with the cause `restricted`); 440 (replaced, cause `replaced`) stop, so two processes never ping-pong one
 * credential; 405 refresh the version and retry; 408/428/500/503/515 reconnect with exponential backoff. Names follow
 * Baileys' `DisconnectReason` and whatsmeow's `ConnectFailureReason`.
 */
export const CLOSE_POLICY: readonly ClosePolicyRow[] = [
  {
    code: 401,
    action: 'wipe',
    reason:
      'logged out (401): the device was unlinked from the phone; credentials deleted, connect and scan a new QR',
  },
  {
    code: 402,
    action: 'stop',
    reason: 'temporarily banned by the platform (402); not reconnecting',
    cause: 'restricted',
  },
  {
    code: 403,
    action: 'stop',
    reason:
      'forbidden by the platform (403): the account may be banned or the phone unlinked; not reconnecting',
    cause: 'restricted',
  },
  {
    code: 406,
    action: 'stop',
    reason: 'logged out by the platform for an unknown reason (406); not reconnecting',
  },
  {
    code: 411,
    action: 'stop',
    reason: 'multi-device mismatch (411): link this device again from the phone; not reconnecting',
  },
  {
    code: 440,
    action: 'stop',
    reason:
      'replaced (440): another client connected with these credentials; not reconnecting (call connect to take over)',
    cause: 'replaced',
  },
  {
    code: 405,
    action: 'refresh-version',
    reason: 'client version outdated (405): refreshing the platform version and retrying',
  },
  { code: 408, action: 'reconnect', reason: 'connection lost or timed out (408); reconnecting' },
  { code: 428, action: 'reconnect', reason: 'connection closed (428); reconnecting' },
  { code: 500, action: 'reconnect', reason: 'bad session or server error (500); reconnecting' },
  { code: 503, action: 'reconnect', reason: 'platform unavailable (503); reconnecting' },
  { code: 515, action: 'reconnect', reason: 'restart required (515); reconnecting' },
];

/**
 * The decision for a close with `code` (undefined = the socket closed without a reason: treated as 428).
 * Codes outside the table: 4xx stop (a refusal the engine cannot fix by retrying), anything else reconnects.
 */
export function decideClose(code: number | undefined): CloseDecision {
  const effective = code ?? 428;
  const row = CLOSE_POLICY.find((r) => r.code === effective);
  if (row) return { ...row };
  if (effective >= 400 && effective < 500) {
    return {
      code: effective,
      action: 'stop',
      reason: `closed by the platform (${effective}); not reconnecting`,
    };
  }
  return {
    code: effective,
    action: 'reconnect',
    reason: `closed by the platform (${effective}); reconnecting`,
  };
}

/**
 * The error a `connect()` gets when the socket closes before the platform answered once: 503
 * `cannot reach the platform: <cause>` for the codes the table retries (network failures, timeouts), 502 with the
 * row's reason for refusals (401, 403, 440, …). Nothing reconnects in the background after a failed connect.
 */
export function connectFailure(decision: CloseDecision, message: string, cause: unknown): DomainError {
  return decision.action === 'reconnect'
    ? new DomainError('platform_unreachable', `cannot reach the platform: ${message}`, { cause })
    : new DomainError('platform_refused', decision.reason, { cause });
}

/**
 * Why a pairing attempt (no paired credentials yet) ended: a 408 is Baileys' "QR refs attempts ended" after the
 * last code (docs/decisions/0016-session-lifecycle.md: connected:false, connect again); other codes keep their row's
 * reason. No retry either way.
 */
export function pairingEndedReason(decision: CloseDecision): string {
  return decision.code === 408
    ? 'pairing ended: no QR code was scanned in time; call connect again'
    : `pairing ended: ${decision.reason}`;
}

/** Smallest reconnect delay, milliseconds (docs/decisions/0025-live-engine.md: delays of 1–60 s). */
export const BACKOFF_MIN_MS = 1_000;
/** Largest reconnect delay, milliseconds (see {@link BACKOFF_MIN_MS}). */
export const BACKOFF_MAX_MS = 60_000;

/**
 * How long a connection must stay open before the backoff starts over, milliseconds
 * (docs/decisions/0025-live-engine.md), but for a connect's first open, which starts it over at once (before it the
 * series counts only the pairing's restart and logins after it that failed before opening). A platform that accepts
 * each login and ends it sooner (a restart, 515, or a drop) keeps the series growing to {@link BACKOFF_MAX_MS}, so it
 * sees about one login a minute at most, never a storm. Equal to that largest delay, so that once the series has grown
 * logins come about a minute apart or more either way: a login after a connection that lasted a minute waits 1 s, one
 * after a shorter connection up to 60 s. whatsmeow starts its delays over at every accepted login (Baileys leaves
 * reconnecting to its user): that is the storm this avoids.
 */
export const STABLE_OPEN_MS = 60_000;

/**
 * Delay before reconnect number `attempt` (0 for the first since the connect, its first open, or the connection last
 * staying open {@link STABLE_OPEN_MS}), milliseconds: 1 s doubled per attempt, capped at 60 s, ±20 % jitter, clamped to
 * 1–60 s. `random` returns [0, 1) (injected by tests).
 */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.max(0, Math.min(attempt, 16)));
  const jittered = base * (0.8 + 0.4 * random());
  return Math.round(Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_MIN_MS, jittered)));
}

/**
 * True when the platform itself ended the connection: Baileys' `Boom` for a `<failure reason>` (its `data` is the
 * node's attributes) or a `<stream:error>` (its `data` is the error node), as Socket/socket.js builds them. A
 * network failure (WebSocket error: `data` is an Error; closed or lost: no `data`) is not a refusal.
 */
export function isPlatformRefusal(error: unknown): boolean {
  if (!isBoom(error)) return false;
  const { data } = error;
  return typeof data === 'object' && data !== null && !(data instanceof Error);
}

/**
 * The stop reason of a login the platform still refuses as outdated (405) after `refreshes` refreshes of the
 * platform version in a row (docs/decisions/0025-live-engine.md): the session stops and says so, where the 405 row's
 * own reason says it retries.
 */
export function versionLoopReason(refreshes: number): string {
  const times = refreshes === 1 ? 'a refresh' : `${refreshes} refreshes`;
  return `client version outdated (405): refused again after ${times} of the platform version in a row; not reconnecting: update parley, then call connect to try again`;
}

/**
 * The stop reason after `count` refusals in a row of a reconnecting login (the last one decided as `last`): the
 * status endpoint's `reason` for a blocked or banned account that would otherwise retry forever.
 */
export function refusalLoopReason(count: number, last: CloseDecision): string {
  const why = last.reason.replace(/; reconnecting$/, '');
  return `the platform refused the login ${count} times in a row (last: ${why}); not reconnecting: the account may be blocked or banned, check it on the phone, then call connect to try again`;
}
