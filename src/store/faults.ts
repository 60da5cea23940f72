import { DomainError, errors } from '../domain/errors.ts';

/**
 * Store faults (docs/decisions/0011-store-faults.md): which errors mean "the store cannot be reached right now"
 * (a request answers 503 with `Retry-After`, inbound recording retries without limit). The Kysely dialect wrapper
 * that applies this classification at the one place every query passes is src/store/fault-aware-dialect.ts.
 */

/** Socket and resolver error codes of a connection that failed or was cut (Node's `errno` names). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  // TLS to the store (`sslmode=require`): a record that failed to decrypt, or a protocol error, breaks the connection.
  'EPROTO',
]);

/**
 * Error codes OpenSSL gives through Node (`ERR_SSL_*`, such as a record that failed to decrypt) when a TLS connection
 * to the store breaks mid-stream: a connection that was cut. A handshake that fails (a certificate not trusted or
 * expired: Node's `CERT_*` and `UNABLE_TO_VERIFY_*` codes) fails while acquiring a connection, which counts as an
 * unreachable store whatever the error.
 */
const TLS_CODE = /^ERR_SSL_/;

/** Whether `code` names a connection that failed or was cut: a socket, resolver or TLS error. */
function isNetworkCode(code: string): boolean {
  return NETWORK_CODES.has(code) || TLS_CODE.test(code);
}

/**
 * PostgreSQL SQLSTATEs of an unreachable server (PostgreSQL manual, Appendix A): class 08 connection exception,
 * class 53 insufficient resources (too many connections, disk full, out of memory), 57P01 admin shutdown (a
 * terminated backend), 57P02 crash shutdown, 57P03 cannot connect now (starting up or shutting down).
 */
function isUnavailableSqlState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    /^57P0[1-3]$/.test(code) ||
    code === READ_ONLY_TRANSACTION
  );
}

/**
 * SQLSTATE 25006 `read_only_sql_transaction`: a write refused by a server that takes none, a standby or a primary
 * demoted by a failover that the connection still reaches; the promoted server takes it (src/store/pg-statements.ts
 * closes such a connection when it goes back to the pool, so the next one is made afresh).
 */
export const READ_ONLY_TRANSACTION = '25006';

/** Errors of a write refused inside a transaction parley itself began `read only`: bugs, never an unreachable store. */
const DECLARED_READ_ONLY = new WeakSet<object>();

/**
 * Marks `error` (a {@link READ_ONLY_TRANSACTION} failure) as raised inside a transaction begun `read only`, so
 * {@link isStoreUnavailableError} does not take it for a server refusing writes: such a write fails at once instead
 * of being waited out for ever. Called by src/store/pg-statements.ts, which knows how each transaction began.
 */
export function markDeclaredReadOnly(error: unknown): void {
  if (typeof error === 'object' && error !== null) DECLARED_READ_ONLY.add(error);
}

/** SQLite result codes (better-sqlite3 `SqliteError.code`, extended codes included) of a store that cannot work now. */
const UNAVAILABLE_SQLITE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|PROTOCOL)(_|$)/;

/** Messages of node-postgres (`pg`, `pg-pool`) for a connection that ended or could not be made in time. */
const UNAVAILABLE_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /client has encountered a connection error and is not queryable/i,
  /connection (?:was )?closed/i,
];

/** The driver's code of `error`: a socket's `errno` name, PostgreSQL's SQLSTATE or SQLite's result code. */
export function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** SQLSTATE of "cached plan must not change result type": a table a prepared `select *` reads gained a column. */
const FEATURE_NOT_SUPPORTED = '0A000';
/** SQLSTATE of "prepared statement … does not exist": the session lost it (`DISCARD ALL`, a pooler between). */
const INVALID_STATEMENT_NAME = '26000';
/**
 * SQLSTATE of "prepared statement … already exists": the session holds a name this connection never prepared, which
 * happens only when a pooler hands the connection another client's server session.
 */
const DUPLICATE_PREPARED_STATEMENT = '42P05';

/**
 * Whether `error` says the server session under the connection is not the one its prepared statements were made
 * in (SQLSTATE 26000 "does not exist" or 42P05 "already exists"): the mark of a pooler in transaction or statement
 * mode between parley and PostgreSQL (src/store/pg-statements.ts, docs/decisions/0055-named-statements.md).
 */
export function isSessionSwitch(error: unknown): boolean {
  const code = codeOf(error);
  return code === INVALID_STATEMENT_NAME || code === DUPLICATE_PREPARED_STATEMENT;
}

/**
 * Whether `error` says a session's prepared statement no longer fits the schema (SQLSTATE 0A000 "cached plan must
 * not change result type"), is gone or is another client's ({@link isSessionSwitch}): transient, as the connection
 * is replaced or the statements run unnamed from then on (src/store/pg-statements.ts,
 * docs/decisions/0055-named-statements.md).
 */
export function isStaleStatement(error: unknown): boolean {
  if (isSessionSwitch(error)) return true;
  const code = codeOf(error);
  return (
    code === FEATURE_NOT_SUPPORTED &&
    error instanceof Error &&
    /cached plan must not change/.test(error.message)
  );
}

/** PostgreSQL's SQLSTATE and SQLite's extended result code of a foreign key violation. */
const FOREIGN_KEY_VIOLATION = new Set(['23503', 'SQLITE_CONSTRAINT_FOREIGNKEY']);

/**
 * `error` as a write of a row of one instance raises it: `instance not found` when it is a foreign key violation,
 * which means the instance was deleted while the request that writes ran (DELETE /v1/instances/{id},
 * docs/decisions/0029-instances-over-the-api.md: its id is 404 from then on); else `error` itself.
 */
export function instanceRowError(error: unknown): unknown {
  const code = codeOf(error);
  return code !== undefined && FOREIGN_KEY_VIOLATION.has(code) ? errors.instanceNotFound() : error;
}

/**
 * True when `error` says the store cannot be reached or cannot work right now, so the same operation may succeed
 * later: a `DomainError` `store_unavailable`; a socket error (ECONNREFUSED, ECONNRESET, ETIMEDOUT, …) or a TLS one (EPROTO, `ERR_SSL_*`); a
 * PostgreSQL SQLSTATE of class 08 or 53, or 57P01–57P03; a SQLite BUSY, LOCKED, IOERR, FULL, CANTOPEN or
 * PROTOCOL result; node-postgres's "Connection terminated …" and connect-timeout messages; a prepared statement gone
 * stale after another process's schema change (src/store/pg-statements.ts: its connection is replaced).
 * Constraint, data and programming errors are not (they repeat on retry).
 */
export function isStoreUnavailableError(error: unknown): boolean {
  if (error instanceof DomainError) return error.code === 'store_unavailable';
  if (typeof error === 'object' && error !== null && DECLARED_READ_ONLY.has(error)) return false;
  if (isStaleStatement(error)) return true;
  const code = codeOf(error);
  if (code !== undefined) {
    if (isNetworkCode(code) || UNAVAILABLE_SQLITE.test(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code)) return isUnavailableSqlState(code);
  }
  const message = error instanceof Error ? error.message : undefined;
  return message !== undefined && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message));
}

/**
 * Runs `work`, waiting out a store that cannot be reached (docs/decisions/0011-store-faults.md) until the clock
 * passes `giveUpAt` (epoch ms; `Infinity`: no bound) or `stop` is aborted (the caller is stopping). Waits double from
 * 100 ms to at most 5 s; only {@link isStoreUnavailableError} errors are waited out. An abort ends a wait at once,
 * so a caller's stop is never held for the rest of a 5 s wait.
 * @throws the store's error when it is not an unreachable store, or once `giveUpAt` has passed or `stop` is aborted
 *   (the last error `work` raised).
 */
export async function untilStoreAnswers<T>(
  work: () => Promise<T>,
  clock: () => number,
  giveUpAt: number,
  stop?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isStoreUnavailableError(error) || clock() >= giveUpAt || stop?.aborted) throw error;
      await pause(Math.min(5_000, 100 * 2 ** (attempt - 1)), stop);
      if (stop?.aborted) throw error;
    }
  }
}

/** Resolves after `ms` milliseconds, or at once when `stop` is aborted (never rejects). */
function pause(ms: number, stop: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      stop?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stop?.addEventListener('abort', done, { once: true });
  });
}

/** The `store_unavailable` errors raised while acquiring a connection: no statement of theirs reached the store. */
const RAISED_CONNECTING = new WeakSet<object>();

/**
 * True when `error` is a `store_unavailable` error raised while acquiring a connection, so the statement it failed
 * never reached the store and nothing of it can have been written. Any other unreachable-store error (a connection
 * lost while a statement or its commit was under way) leaves the outcome unknown: the store may have carried the
 * statement out and only its answer was lost (docs/decisions/0011-store-faults.md).
 */
export function failedBeforeSending(error: unknown): boolean {
  return error instanceof DomainError && RAISED_CONNECTING.has(error);
}

/**
 * A `store_unavailable` error for a write that was not sent to the store because an earlier write it must follow
 * failed with `cause` (the recorder's items of an instance queued behind a batch the store failed,
 * src/events/recorder.ts): {@link failedBeforeSending} is true for it, so nothing of the write is taken for kept
 * (docs/decisions/0011-store-faults.md).
 */
export function notSentBehind(cause: unknown): DomainError {
  const unavailable = errors.storeUnavailable(cause);
  RAISED_CONNECTING.add(unavailable);
  return unavailable;
}

/**
 * True when a statement that failed with `error` may still have been carried out: the store is remote and the
 * connection broke while the statement or its commit was under way, so the store may have committed it and only the
 * answer was lost (a socket or TLS error, PostgreSQL SQLSTATE class 08 or 57P01–57P03, node-postgres's "Connection
 * terminated"). False for an error raised while acquiring a connection ({@link failedBeforeSending}), for SQLite's
 * errors (in-process: a failed statement was rolled back before it returned) and for any error the store answered
 * with, such as class 53 or a stale prepared statement: nothing of the statement was kept then.
 */
export function outcomeUnknown(error: unknown): boolean {
  if (!(error instanceof DomainError) || error.code !== 'store_unavailable' || failedBeforeSending(error))
    return false;
  const cause = error.cause;
  const code = codeOf(cause);
  if (code !== undefined) {
    if (isNetworkCode(code)) return true;
    return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
  }
  const message = cause instanceof Error ? cause.message : undefined;
  return message !== undefined && /connection terminated/i.test(message);
}

/**
 * True when `error` (as the driver raised it) says the connection itself is gone: a socket or TLS error, or
 * node-postgres's "Connection terminated" and "not queryable" (a client after a connection error). Not SQLite's
 * errors: its connection is in the process and stays.
 */
export function connectionBroke(error: unknown): boolean {
  const code = codeOf(error);
  if (code !== undefined && isNetworkCode(code)) return true;
  const message = error instanceof Error ? error.message : undefined;
  return message !== undefined && /connection terminated|not queryable/i.test(message);
}

/**
 * True when `error` is SQLite's answer to a `rollback` with no transaction open ("cannot rollback - no transaction is
 * active"): the transaction already ended, as SQLite ends it itself after SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM or
 * SQLITE_BUSY in some statements, the commit included.
 */
export function transactionAlreadyEnded(error: unknown): boolean {
  return (
    codeOf(error) === 'SQLITE_ERROR' &&
    error instanceof Error &&
    /no transaction is active/.test(error.message)
  );
}

/** `error` as the store raises it: a `store_unavailable` DomainError (cause kept) when unreachable, else itself. */
export function classified(error: unknown, connecting: boolean): unknown {
  if (error instanceof DomainError) return error;
  if (connecting) {
    const unavailable = errors.storeUnavailable(error);
    RAISED_CONNECTING.add(unavailable);
    return unavailable;
  }
  if (isStoreUnavailableError(error)) return errors.storeUnavailable(error);
  return error;
}
