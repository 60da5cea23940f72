import type { ConnectionState, EngineEvent, SessionStatusKind } from '../domain/messages.ts';

/** The part of a {@link ConnectionState} the session status depends on. */
export type ConnectionSummary = Pick<ConnectionState, 'connected' | 'loggedIn' | 'reason' | 'cause'>;

/** A `sessionStatus` engine event (the variant of {@link EngineEvent}). */
export type SessionStatusEngineEvent = Extract<EngineEvent, { type: 'sessionStatus' }>;

/**
 * The session status a connection change means, or null when the change means none (a repeated state, or a
 * failed first connect of an instance that was neither connected nor logged in). The rule of
 * docs/decisions/0012-session-and-message-status-events.md, read from the states every engine reports
 * (`connected` is true while open or while a pairing attempt shows a QR code; `loggedIn` while paired
 * credentials exist):
 *
 * | previous            | next                                   | status                         |
 * | ------------------- | -------------------------------------- | ------------------------------ |
 * | not showing a QR    | connected, not logged in               | `qr`                           |
 * | showing a QR        | not connected, logged in               | `pairing` (the phone accepted) |
 * | not open            | connected, logged in                   | `connected`                    |
 * | logged in           | not connected, not logged in           | `logged_out`                   |
 * | connected (QR)      | not connected, not logged in           | `disconnected` (pairing ended) |
 * | any                 | not connected, logged in, `cause` set  | `replaced` / `restricted`      |
 * | connected, or another reason | not connected, logged in      | `disconnected`                 |
 *
 * `reason` is the engine's (absent after a requested disconnect or logout, and for `qr`, `pairing`, `connected`).
 * @param at epoch ms of the change.
 */
export function sessionStatusOf(
  previous: ConnectionSummary,
  next: ConnectionSummary,
  at: number,
): SessionStatusEngineEvent | null {
  const status = statusOf(previous, next);
  if (status === null) return null;
  const withReason = status !== 'qr' && status !== 'pairing' && status !== 'connected';
  return {
    type: 'sessionStatus',
    status,
    ...(withReason && next.reason !== undefined ? { reason: next.reason } : {}),
    at,
  };
}

function statusOf(previous: ConnectionSummary, next: ConnectionSummary): SessionStatusKind | null {
  if (next.connected) {
    if (!next.loggedIn) return previous.connected && !previous.loggedIn ? null : 'qr';
    return previous.connected && previous.loggedIn ? null : 'connected';
  }
  if (!next.loggedIn) {
    if (previous.loggedIn) return 'logged_out';
    return previous.connected ? 'disconnected' : null;
  }
  if (previous.connected && !previous.loggedIn) return 'pairing';
  const changed = previous.connected || previous.reason !== next.reason || previous.cause !== next.cause;
  if (!changed) return null;
  return next.cause ?? 'disconnected';
}

/**
 * Follows one session's connection states and turns each change into its session status event
 * ({@link sessionStatusOf}). One per engine session, fed every `connection` event the session emits, in order.
 */
export class SessionStatusTracker {
  #last: ConnectionSummary;

  /**
   * @param initial the state before the session's first event: not connected, and logged in when the instance
   *   has a linked account (what the status endpoint reports for an instance without a session here).
   */
  constructor(initial: ConnectionSummary) {
    this.#last = { ...initial };
  }

  /** The status event `next` means (null for none), remembering `next` as the current state. `at` epoch ms. */
  next(next: ConnectionState, at: number): SessionStatusEngineEvent | null {
    const event = this.peek(next, at);
    this.accept(next);
    return event;
  }

  /**
   * The status event `next` would mean (null for none), without remembering it: compared with `after` (a state not yet
   * stored that comes before it in the same transaction) or the last state remembered. `at` epoch ms.
   */
  peek(next: ConnectionState, at: number, after?: ConnectionSummary): SessionStatusEngineEvent | null {
    return sessionStatusOf(after ?? this.#last, next, at);
  }

  /**
   * Remembers `next` as the current state: once it was recorded with its status event (a state whose recording
   * failed is not the store's, so the next state is compared with the last one recorded).
   */
  accept(next: ConnectionState): void {
    this.#last = {
      connected: next.connected,
      loggedIn: next.loggedIn,
      ...(next.reason === undefined ? {} : { reason: next.reason }),
      ...(next.cause === undefined ? {} : { cause: next.cause }),
    };
  }
}
