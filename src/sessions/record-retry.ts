import type { FastifyBaseLogger } from 'fastify';
import { type EngineEvent, eventLogFields } from '../domain/messages.ts';

/**
 * How a failed recording is retried (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0005-outbox-and-delivery.md: an event the platform delivered once is not resent, so a transient
 * store failure such as a PostgreSQL connection reset must not drop it). Applied by the session manager to every
 * engine's `emit`, so the sandbox and Baileys have the same durability. Try `n` (n ≥ 2) waits `baseDelayMs × 2^(n-2)`
 * ms ±20 % jitter; after `attempts` tries the last error is raised.
 */
export interface RecordRetryPolicy {
  /** Tries in all, the first included (≥ 1). */
  attempts: number;
  /** Wait before the second try, ms; doubles for every later try. */
  baseDelayMs: number;
  /** Random source in [0, 1) for the jitter. */
  random: () => number;
}

/** Default tries and first wait (ms): 5 tries over about 1.5 s (100, 200, 400, 800 ms waits). */
export const RECORD_RETRY = { attempts: 5, baseDelayMs: 100 } as const;

/** SQLSTATE classes of PostgreSQL errors that repeat on retry: data exception, integrity, syntax or access. */
const PERMANENT_SQLSTATE_CLASSES = new Set(['22', '23', '42']);

/** SQLite result codes (better-sqlite3 `SqliteError.code`) that repeat on retry. */
const PERMANENT_SQLITE = /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE)/;

/**
 * True when retrying the recording cannot help: a programming error (`TypeError`, `RangeError`,
 * `ReferenceError`, `SyntaxError`), a PostgreSQL error of SQLSTATE class 22/23/42, or a SQLite constraint,
 * mismatch, too-big or range error. Everything else (connection resets and refusals, timeouts, SQLSTATE 08xxx,
 * 40001 serialization failures, 40P01 deadlocks, 57P0x shutdowns, SQLITE_BUSY/LOCKED, unknown errors) counts as
 * transient, since dropping an event that a retry would have kept is data loss.
 */
export function isPermanentStoreError(error: unknown): boolean {
  if (
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof ReferenceError ||
    error instanceof SyntaxError
  )
    return true;
  const code =
    typeof error === 'object' && error !== null && 'code' in error
      ? (error as { code: unknown }).code
      : undefined;
  if (typeof code !== 'string') return false;
  if (/^[0-9A-Z]{5}$/.test(code)) return PERMANENT_SQLSTATE_CLASSES.has(code.slice(0, 2));
  return PERMANENT_SQLITE.test(code);
}

/** Wait before try `attempt + 1` after try `attempt` failed (attempt ≥ 1), ms: doubling from the base, ±20 %. */
export function recordRetryDelayMs(attempt: number, policy: RecordRetryPolicy): number {
  const base = policy.baseDelayMs * 2 ** (attempt - 1);
  return Math.round(base * (0.8 + 0.4 * policy.random()));
}

/**
 * Records `event` through `context.emit` (the recorder), retrying per `policy` (each retry logged at warn with the event's
 * {@link eventLogFields}); resolves once recorded. Events of one caller stay in order because the caller awaits
 * this before emitting its next event.
 * @throws the last recording error after `policy.attempts` tries, or at once when {@link isPermanentStoreError}.
 */
export async function recordWithRetry(
  context: { emit(event: EngineEvent): Promise<void>; logger: FastifyBaseLogger },
  event: EngineEvent,
  policy: RecordRetryPolicy,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await context.emit(event);
      return;
    } catch (error) {
      if (attempt >= policy.attempts || isPermanentStoreError(error)) throw error;
      const delayMs = recordRetryDelayMs(attempt, policy);
      context.logger.warn(
        { err: error, ...eventLogFields(event), attempt, attempts: policy.attempts, delayMs },
        'recording an event failed; retrying',
      );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}
