import type { DomainError } from '../../domain/errors.ts';
import type { ConnectionState } from '../../domain/messages.ts';
import {
  backoffDelayMs,
  type CloseDecision,
  connectFailure,
  decideClose,
  isPlatformRefusal,
  pairingEndedReason,
  refusalLoopReason,
  versionLoopReason,
} from './close-policy.ts';
import { isBoom } from './errors.ts';

/** Version refreshes a reconnecting login makes in a row before it stops (docs/decisions/0025-live-engine.md). */
const MAX_VERSION_REFRESHES = 3;

/** What a lifecycle knows when its socket closed, beside the close's {@link CloseDecision}. */
export interface ClosedSocket {
  decision: CloseDecision;
  /** The close's error message (`connection closed` when it had none). */
  message: string;
  /** The close's error, kept as the cause of a failed connect. */
  error: unknown;
  /** True while `connect()` waits for the platform's first answer (a QR code or an open connection). */
  connecting: boolean;
  /** The stored credentials are paired (a pairing attempt has none yet). */
  paired: boolean;
  /** The platform itself refused the login (`isPlatformRefusal`), not a network failure. */
  refusal: boolean;
  /** Refusals counted since the connection was last open, before this close. */
  refusals: number;
  /** Refusals in a row after which a reconnecting login stops (`LifecycleOptions.loginRefusalLimit`). */
  refusalLimit: number;
  /**
   * Version refreshes since the connect's first open (since the connect, before it), or since the connection last
   * stayed open (`STABLE_OPEN_MS`).
   */
  refreshes: number;
  /**
   * Reconnects over the same span as {@link refreshes} (`Reconnects.attempt`): the pairing's restart counts only until
   * the connect's first open, and a later connection the platform ends sooner than `STABLE_OPEN_MS` does not start the
   * series over.
   */
  attempt: number;
  /** Random numbers in [0, 1) for the backoff's jitter. */
  random: () => number;
}

/** What the lifecycle does after a close: the cases of docs/decisions/0025-live-engine.md, in order. */
export type AfterClose =
  /** Still connecting: the platform's restart (515) or a first outdated version; a new socket at once. */
  | { kind: 'reopen'; refreshVersion: boolean }
  /** Still connecting, anything else: `connect()` fails with `failure`; nothing reconnects. */
  | { kind: 'fail-connect'; failure: DomainError; wipe: boolean; cause: ConnectionState['cause'] }
  /** Stop with `reason`, deleting the credentials when `wipe`. */
  | { kind: 'stop'; reason: string; wipe: boolean; cause: ConnectionState['cause'] }
  /** A new socket in `delayMs` milliseconds (after fetching the platform's version when `refreshVersion`). */
  | { kind: 'retry'; delayMs: number; refreshVersion: boolean; reason: string };

/**
 * Decides what follows a close (docs/decisions/0025-live-engine.md, docs/decisions/0016-session-lifecycle.md): while
 * connecting, a 515 or the first 405 opens a new socket and anything else fails the connect (a 405 after a refresh
 * with `versionLoopReason`); a pairing attempt that closes for any code but 515 ends and deletes what it stored; a
 * login refused `refusalLimit` times in a row stops with the cause `restricted`; otherwise the close-code table's
 * action, a refresh-version stopping after three in a row (with `versionLoopReason`, not the row's "retrying"), and a
 * reconnect waiting {@link backoffDelayMs} (none after a version refresh, nor for a 515 at `attempt` 0:
 * the platform's restart after pairing, or the first since the connect's first open or a stable open).
 * @returns the plan and the refusals counted since the last open, this close included.
 */
export function planAfterClose(closed: ClosedSocket): { plan: AfterClose; refusals: number } {
  const { decision } = closed;
  let { refusals } = closed;
  const plan = ((): AfterClose => {
    if (closed.connecting) {
      if (decision.code === 515 || (decision.action === 'refresh-version' && closed.refreshes < 1)) {
        return { kind: 'reopen', refreshVersion: decision.action === 'refresh-version' };
      }
      // Refused as outdated after a refresh: the 405 row's reason says it retries, and nothing does.
      const failed =
        decision.action === 'refresh-version'
          ? { ...decision, reason: versionLoopReason(closed.refreshes) }
          : decision;
      return {
        kind: 'fail-connect',
        failure: connectFailure(failed, closed.message, closed.error),
        wipe: decision.action === 'wipe',
        cause: decision.cause,
      };
    }
    if (!closed.paired && decision.code !== 515) {
      return { kind: 'stop', reason: pairingEndedReason(decision), wipe: true, cause: undefined };
    }
    if (decision.action === 'reconnect' && closed.refusal) {
      refusals += 1;
      if (refusals >= closed.refusalLimit) {
        return {
          kind: 'stop',
          reason: refusalLoopReason(refusals, decision),
          wipe: false,
          cause: 'restricted',
        };
      }
    }
    if (decision.action === 'wipe')
      return { kind: 'stop', reason: decision.reason, wipe: true, cause: undefined };
    if (decision.action === 'stop') {
      return { kind: 'stop', reason: decision.reason, wipe: false, cause: decision.cause };
    }
    if (decision.action === 'refresh-version' && closed.refreshes >= MAX_VERSION_REFRESHES) {
      return { kind: 'stop', reason: versionLoopReason(closed.refreshes), wipe: false, cause: undefined };
    }
    if (decision.action === 'refresh-version') {
      return { kind: 'retry', delayMs: 0, refreshVersion: true, reason: decision.reason };
    }
    // The platform's restart (515, after pairing above all) is answered with a new socket at once when it is the
    // first reconnect since the connect, its first open or the connection last staying open; one that comes again
    // sooner (before an open, or right after a short one) backs off like any other close.
    const delayMs =
      decision.code === 515 && closed.attempt === 0 ? 0 : backoffDelayMs(closed.attempt, closed.random);
    const reason =
      delayMs > 0 ? `${decision.reason} in ${Math.round(delayMs / 100) / 10} s` : decision.reason;
    return { kind: 'retry', delayMs, refreshVersion: false, reason };
  })();
  return { plan, refusals };
}

/** What a lifecycle counts and knows of itself when its socket closes (see {@link ClosedSocket}). */
export type LifecycleAtClose = Omit<ClosedSocket, 'decision' | 'message' | 'error' | 'refusal'>;

/**
 * What follows a close with `error` (a Boom carrying the platform's close code, or anything else) of a lifecycle
 * that is as `at` says: the close-code table's decision (close-policy.ts `decideClose`), the close's message
 * (`connection closed` when it has none), whether the platform refused the login (`isPlatformRefusal`), and then
 * {@link planAfterClose}. @returns the decision, the plan and the refusals counted since the last open.
 */
export function planForClose(
  error: unknown,
  at: LifecycleAtClose,
): { decision: CloseDecision; plan: AfterClose; refusals: number } {
  const decision = decideClose(isBoom(error) ? error.output.statusCode : undefined);
  const message = error instanceof Error ? error.message : 'connection closed';
  return {
    decision,
    ...planAfterClose({ ...at, decision, message, error, refusal: isPlatformRefusal(error) }),
  };
}
