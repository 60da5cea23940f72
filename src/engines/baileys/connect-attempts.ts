import { DomainError, SessionLockHeldError } from '../../domain/errors.ts';
import type { SessionLock } from '../engine.ts';

/** A connection attempt of `Lifecycle.connect` (lifecycle.ts): what cancelled it first, once a teardown did. */
export interface StartAttempt {
  cancelled: DomainError | undefined;
}

/** The error of a connection attempt that `what` (a disconnect, a logout, a lost lock) cancelled. */
export function cancelledBy(what: string): DomainError {
  return new DomainError('conflict', `the connection attempt was cancelled by ${what}`);
}

/**
 * The error of a connection attempt the platform did not answer (a QR code or an open connection) within `ms`
 * milliseconds: platform_unreachable (503).
 */
export function noAnswerWithin(ms: number): DomainError {
  return new DomainError(
    'platform_unreachable',
    `cannot reach the platform: no answer within ${ms / 1000} s`,
  );
}

/**
 * The one connection attempt a live session's lifecycle runs at a time (lifecycle.ts `Lifecycle.connect`,
 * docs/decisions/0025-live-engine.md): the running attempt's promise, and what cancelled it once a teardown (or a
 * logout, as it begins) did. The first cancel is kept: the attempt's caller hears what ended it, not what came after
 * (a disconnect's conflict, not the 503 of a release that followed, which would tell its client to retry).
 */
export class ConnectAttempts {
  #starting: Promise<void> | null = null;
  /** The running {@link #starting}'s attempt, null once it ended. */
  #attempt: StartAttempt | null = null;

  /**
   * The running attempt, or null: `done` settles as the attempt does, and `cancelled` is true once a teardown
   * cancelled it ({@link cancel}).
   */
  get running(): { done: Promise<void>; cancelled: boolean } | null {
    if (this.#starting === null) return null;
    return { done: this.#starting, cancelled: this.#attempt?.cancelled !== undefined };
  }

  /**
   * Runs `start` as the running attempt, handed its {@link StartAttempt} (which it reads to learn of a cancel), until
   * it settles. @returns `start`'s promise. Call it only when no attempt runs ({@link running} null).
   */
  start(start: (attempt: StartAttempt) => Promise<void>): Promise<void> {
    const attempt: StartAttempt = { cancelled: undefined };
    this.#attempt = attempt;
    this.#starting = start(attempt).finally(() => {
      this.#starting = null;
      if (this.#attempt === attempt) this.#attempt = null;
    });
    return this.#starting;
  }

  /**
   * Cancels the attempt still running, if any, with `cancel`, unless an earlier teardown already did (the attempt
   * ends with the first).
   */
  cancel(cancel: DomainError): void {
    if (this.#attempt !== null) this.#attempt.cancelled ??= cancel;
  }
}

/**
 * The store's part of connection attempt `attempt` (lifecycle.ts `Lifecycle.#start`): takes the one-socket `lock`,
 * then loads the credentials (`load`). When a teardown cancelled the attempt meanwhile (`attempt.cancelled` set while
 * either waited on the store), it releases the lock it took and throws that cancel, so the attempt opens nothing.
 * @throws SessionLockHeldError (409 conflict `instance is connected by another parley process (…)`) when another
 *   process holds the lock; the attempt's cancel; the credentials' read error (the lock released); the lock's store error.
 */
export async function takeLockAndCredentials(
  attempt: StartAttempt,
  lock: SessionLock,
  load: () => Promise<unknown>,
): Promise<void> {
  const taken = await lock.acquire();
  if (!taken.acquired) throw new SessionLockHeldError(taken.holder, taken.expiresAt);
  if (attempt.cancelled !== undefined) {
    await lock.release();
    throw attempt.cancelled;
  }
  try {
    await load();
  } catch (error) {
    await lock.release();
    throw attempt.cancelled ?? error;
  }
  if (attempt.cancelled !== undefined) {
    await lock.release();
    throw attempt.cancelled;
  }
}
