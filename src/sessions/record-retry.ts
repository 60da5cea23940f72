import type { FastifyBaseLogger } from 'fastify';
import { DomainError, SessionReleasedError } from '../domain/errors.ts';
import { type EngineEvent, eventLogFields } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import { instanceRowError, isStoreUnavailableError } from '../store/faults.ts';

/**
 * How a failed recording is retried (docs/decisions/0011-store-faults.md): an event the platform delivered was
 * already acknowledged and is never sent again, so a store that cannot be reached must not drop it. Applied by
 * the session manager to every engine's `emit`, so the sandbox and Baileys have the same durability.
 *
 * - A permanent error ({@link isPermanentStoreError}: constraint, data or programming error) is raised at once:
 *   retrying repeats it.
 * - A transient one ({@link isTransientStoreError}: the store unreachable, busy, a serialization failure or a
 *   deadlock) is retried without limit unless the caller passes a bound (`attempts` or `deadline`).
 * - Any other error is retried `unknownAttempts` times in all, then raised (an unforeseen bug must not hold the
 *   instance's later events back for ever).
 *
 * Try `n` (n ≥ 2) waits `min(maxDelayMs, baseDelayMs × 2^(n-2))` ms ±20 % jitter.
 */
export interface RecordRetryPolicy {
  /** Wait before the second try, ms; doubles for every later try up to `maxDelayMs`. */
  baseDelayMs: number;
  /** Longest wait between two tries, ms (the wait stops doubling here). */
  maxDelayMs: number;
  /** Tries in all (the first included, ≥ 1) for an error neither permanent nor known to be transient. */
  unknownAttempts: number;
  /** Tries in all for any error, the first included; undefined: without limit (inbound events). */
  attempts?: number;
  /** Random source in [0, 1) for the jitter. */
  random: () => number;
}

/**
 * Defaults: first wait 100 ms, doubling to at most 5 s (a store that comes back is used within about 5 s), an
 * unknown error tried 5 times (about 1.5 s).
 */
export const RECORD_RETRY = { baseDelayMs: 100, maxDelayMs: 5_000, unknownAttempts: 5 } as const;

/** SQLSTATE classes of PostgreSQL errors that repeat on retry: data exception, integrity, syntax or access. */
const PERMANENT_SQLSTATE_CLASSES = new Set(['22', '23', '42']);

/** SQLite result codes (better-sqlite3 `SqliteError.code`) that repeat on retry. */
const PERMANENT_SQLITE = /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE)/;

function codeOf(error: unknown): string | undefined {
  const code =
    typeof error === 'object' && error !== null && 'code' in error
      ? (error as { code: unknown }).code
      : undefined;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when retrying the recording cannot help: a programming error (`TypeError`, `RangeError`,
 * `ReferenceError`, `SyntaxError`), a PostgreSQL error of SQLSTATE class 22/23/42, or a SQLite constraint,
 * mismatch, too-big or range error. Everything else counts as worth retrying (see {@link isTransientStoreError}
 * for which errors are retried without limit).
 */
export function isPermanentStoreError(error: unknown): boolean {
  if (
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof ReferenceError ||
    error instanceof SyntaxError
  )
    return true;
  const code = codeOf(error);
  if (code === undefined) return false;
  if (/^[0-9A-Z]{5}$/.test(code)) return PERMANENT_SQLSTATE_CLASSES.has(code.slice(0, 2));
  return PERMANENT_SQLITE.test(code);
}

/**
 * True when the store is known to fail only for now: unreachable or not working ({@link isStoreUnavailableError}:
 * connection refused or cut, SQLSTATE 08xxx/53xxx/57P01–57P03, SQLITE_BUSY/LOCKED/IOERR, …), a PostgreSQL
 * serialization failure (40001), deadlock (40P01) or lock wait refused (55P03). Retried without limit.
 */
export function isTransientStoreError(error: unknown): boolean {
  if (isStoreUnavailableError(error)) return true;
  const code = codeOf(error);
  return code === '40001' || code === '40P01' || code === '55P03';
}

/**
 * Wait before try `attempt + 1` after try `attempt` failed (attempt ≥ 1), ms: doubling from the base, capped at
 * `maxDelayMs`, ±20 % jitter.
 */
export function recordRetryDelayMs(attempt: number, policy: RecordRetryPolicy): number {
  const base = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(base * (0.8 + 0.4 * policy.random()));
}

/** Options of one {@link recordWithRetry} call. */
export interface RecordRetryOptions {
  /** Stops the retries (shutdown): the pending wait ends, one last try is made, then its error is raised. */
  signal?: AbortSignal;
  /**
   * Tries of the event already made (≥ 1) and the error the last one failed with: the call goes on from there as if
   * it had made them (that error judged, logged and waited on first), so a caller that tried once on its own keeps
   * the policy's limits and waits (src/sessions/record-line.ts).
   */
  failed?: { attempts: number; error: unknown };
  /**
   * Stops the retries with no further try (the session was released and the item writes engine state, which the
   * instance's new owner writes from then on, docs/decisions/0008-leases-and-fencing.md): the pending wait ends and
   * {@link releasedError} is raised; aborted before a try, nothing is written.
   */
  released?: AbortSignal;
}

/**
 * The error a write of a session released by `released` raises instead of writing: the abort's reason when it is a
 * {@link DomainError} (the instance deleted: `not_found` `instance not found`, as the write itself would have
 * failed once the row was gone), else a {@link SessionReleasedError}.
 */
export function releasedError(released: AbortSignal): DomainError {
  return released.reason instanceof DomainError ? released.reason : new SessionReleasedError();
}

/** Sleeps `ms`, ending early when any of `signals` aborts. */
export function pause(ms: number, ...signals: readonly (AbortSignal | undefined)[]): Promise<void> {
  return new Promise((resolve) => {
    const listening = signals.filter((signal): signal is AbortSignal => signal !== undefined);
    if (listening.some((signal) => signal.aborted)) return resolve();
    const done = () => {
      clearTimeout(timer);
      for (const signal of listening) signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const signal of listening) signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Records `event` through `context.emit` (the recorder), retrying per `policy` and the rules of
 * {@link RecordRetryPolicy}; resolves once recorded. The first failure of an event and then every tenth is
 * logged at warn with the event's {@link eventLogFields} (never a body). Events of one caller stay in order
 * because the caller awaits this before emitting its next event; the events of callers that do not wait for each
 * other (a session's sends and its incoming events) are kept in order by the session's `RecordLine`
 * (src/sessions/record-line.ts), which calls this for one of them at a time.
 * @throws at once a {@link isPermanentStoreError} error; an unknown error after `policy.unknownAttempts` tries; any
 *   error after `policy.attempts` tries when set; the last error once `options.signal` aborted; `releasedError`
 *   once `options.released` aborted (no try is made after that).
 */
export async function recordWithRetry(
  context: { emit(event: EngineEvent): Promise<void>; logger: FastifyBaseLogger },
  event: EngineEvent,
  policy: RecordRetryPolicy,
  options: RecordRetryOptions = {},
): Promise<void> {
  const { signal, failed, released } = options;
  /** Tries made so far, and the error the last one failed with. */
  let attempt = failed?.attempts ?? 0;
  let last = failed?.error;
  /**
   * Whether this call made a try: once `signal` aborted, the next failure raises, but an event that comes with its
   * failed tries (`failed`) first makes the one last try of its own.
   */
  let tried = false;
  for (;;) {
    if (attempt > 0) {
      // A foreign key violation: the instance was deleted while its event was recorded (`instance not found`).
      if (isPermanentStoreError(last)) throw instanceRowError(last);
      const transient = isTransientStoreError(last);
      const limit = policy.attempts ?? (transient ? undefined : policy.unknownAttempts);
      if ((limit !== undefined && attempt >= limit) || (signal?.aborted && tried)) throw last;
      const delayMs = recordRetryDelayMs(attempt, policy);
      if (attempt === 1 || attempt % 10 === 0) {
        context.logger.warn(
          {
            err: last,
            ...eventLogFields(event),
            attempt,
            ...(limit === undefined ? {} : { attempts: limit }),
            delayMs,
          },
          'recording an event failed; retrying',
        );
      }
      await pause(delayMs, signal, released);
    }
    if (released?.aborted) throw releasedError(released);
    tried = true;
    attempt += 1;
    try {
      await context.emit(event);
      if (attempt > 1)
        context.logger.info(
          extended(eventLogFields(event), { attempts: attempt }),
          'recorded an event after retrying',
        );
      return;
    } catch (error) {
      last = error;
    }
  }
}
