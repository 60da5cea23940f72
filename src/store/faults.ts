import type {
  DatabaseConnection,
  DatabaseIntrospector,
  Dialect,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import { DomainError, errors } from '../domain/errors.ts';

/**
 * Store faults (docs/decisions/0011-store-faults.md): which errors mean "the store cannot be reached right now"
 * (a request answers 503 with `Retry-After`, inbound recording retries without limit), and the Kysely dialect
 * wrapper that turns them into a `DomainError` `store_unavailable` at the one place every query passes.
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

function codeOf(error: unknown): string | undefined {
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
function connectionBroke(error: unknown): boolean {
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
function transactionAlreadyEnded(error: unknown): boolean {
  return (
    codeOf(error) === 'SQLITE_ERROR' &&
    error instanceof Error &&
    /no transaction is active/.test(error.message)
  );
}

/** `error` as the store raises it: a `store_unavailable` DomainError (cause kept) when unreachable, else itself. */
function classified(error: unknown, connecting: boolean): unknown {
  if (error instanceof DomainError) return error;
  if (connecting) {
    const unavailable = errors.storeUnavailable(error);
    RAISED_CONNECTING.add(unavailable);
    return unavailable;
  }
  if (isStoreUnavailableError(error)) return errors.storeUnavailable(error);
  return error;
}

/**
 * A test-only fault hook: called with the SQL text before every query; when it throws, the query fails with that
 * error as the driver's would (tests make SQLite answer SQLITE_BUSY or SQLITE_IOERR for a while). Never set from
 * configuration.
 */
export type StoreFaultHook = (sql: string) => void;

/**
 * Wraps `dialect` so that every error meaning the store is unreachable leaves Kysely as a `DomainError`
 * `store_unavailable` (its `cause` the driver's error), which the HTTP layer answers with 503 and `Retry-After`
 * (docs/api.md, Errors). Any error while acquiring a connection counts as unreachable (a refused or timed-out
 * connect, a database not accepting connections). Other errors pass unchanged. `faults` is the test-only
 * {@link StoreFaultHook}; `lostAnswers`, also test-only, is called with the SQL text once the store carried a query
 * out, and when it throws the query fails with that error although its work is kept, as when the connection drops
 * between a statement's commit and its answer (outside a transaction a statement commits on its own).
 */
export function faultAwareDialect(
  dialect: Dialect,
  faults?: StoreFaultHook,
  lostAnswers?: StoreFaultHook,
): Dialect {
  return {
    createDriver: () => new FaultAwareDriver(dialect.createDriver(), faults, lostAnswers),
    createQueryCompiler: (): QueryCompiler => dialect.createQueryCompiler(),
    createAdapter: () => dialect.createAdapter(),
    // biome-ignore lint/suspicious/noExplicitAny: Kysely's own Dialect signature takes Kysely<any>
    createIntrospector: (db: Kysely<any>) => retryingIntrospector(dialect.createIntrospector(db)),
  };
}

/** SQLSTATEs of a catalog read that met a concurrent drop: undefined table (42P01) or undefined column (42703). */
const CATALOG_RACE = new Set(['42P01', '42703']);

/** Most reads of the catalog {@link retryingIntrospector} makes for one call. */
const CATALOG_READS = 5;

/**
 * `inner` with each read retried when another connection dropped a table or column while it ran. A catalog read
 * (the migrator's, to find its own tables: src/store/pg-introspection.ts on PostgreSQL) resolves the names of the
 * tables it lists within the same statement, so a table or column dropped meanwhile by another connection fails it
 * with 42P01 or 42703 although nothing this store needs changed. Other errors, and the last failed read, are
 * raised as they came.
 */
function retryingIntrospector(inner: DatabaseIntrospector): DatabaseIntrospector {
  const again = async <T>(read: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await read();
      } catch (error) {
        const code = codeOf(error);
        if (attempt >= CATALOG_READS || code === undefined || !CATALOG_RACE.has(code)) throw error;
      }
    }
  };
  return {
    getSchemas: () => again(() => inner.getSchemas()),
    getTables: (options) => again(() => inner.getTables(options)),
    getMetadata: (options) => again(() => inner.getMetadata(options)),
  };
}

/** A connection whose query errors are classified; the inner connection is what the inner driver gets back. */
class FaultAwareConnection implements DatabaseConnection {
  readonly inner: DatabaseConnection;
  readonly #faults: StoreFaultHook | undefined;
  readonly #lostAnswers: StoreFaultHook | undefined;

  constructor(
    inner: DatabaseConnection,
    faults: StoreFaultHook | undefined,
    lostAnswers: StoreFaultHook | undefined,
  ) {
    this.inner = inner;
    this.#faults = faults;
    this.#lostAnswers = lostAnswers;
  }

  /**
   * The first fault the hook injected on this connection (a transaction's, as Kysely acquires one per transaction),
   * recorded as it is thrown: a statement whose rejection nobody awaits (`runLast`, src/store/last-statement.ts)
   * must still fail its transaction's `commit`.
   */
  injected: unknown;

  /** The transaction's `commit` was sent: a rollback after it on a broken connection leaves the commit's error. */
  committing = false;

  async executeQuery<R>(
    compiledQuery: Parameters<DatabaseConnection['executeQuery']>[0],
  ): Promise<QueryResult<R>> {
    try {
      this.#faults?.(compiledQuery.sql);
    } catch (error) {
      this.injected ??= error;
      throw classified(error, false);
    }
    let result: QueryResult<R>;
    try {
      result = await this.inner.executeQuery<R>(compiledQuery);
      this.#lostAnswers?.(compiledQuery.sql);
    } catch (error) {
      throw classified(error, false);
    }
    return result;
  }

  async *streamQuery<R>(
    compiledQuery: Parameters<DatabaseConnection['streamQuery']>[0],
    chunkSize?: number,
  ): AsyncIterableIterator<QueryResult<R>> {
    try {
      this.#faults?.(compiledQuery.sql);
      yield* this.inner.streamQuery<R>(compiledQuery, chunkSize);
    } catch (error) {
      throw classified(error, false);
    }
  }
}

class FaultAwareDriver implements Driver {
  readonly #inner: Driver;
  readonly #faults: StoreFaultHook | undefined;
  readonly #lostAnswers: StoreFaultHook | undefined;

  constructor(inner: Driver, faults: StoreFaultHook | undefined, lostAnswers: StoreFaultHook | undefined) {
    this.#inner = inner;
    this.#faults = faults;
    this.#lostAnswers = lostAnswers;
  }

  async #run<T>(work: () => Promise<T>, connecting = false): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw classified(error, connecting);
    }
  }

  /** The wrapped connection's inner one (the inner driver's own methods need its own object). */
  #unwrap(connection: DatabaseConnection): DatabaseConnection {
    return connection instanceof FaultAwareConnection ? connection.inner : connection;
  }

  init(): Promise<void> {
    return this.#run(() => this.#inner.init(), true);
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.#run(() => this.#inner.acquireConnection(), true);
    return new FaultAwareConnection(inner, this.#faults, this.#lostAnswers);
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    // A connection may carry several transactions (`db.connection()`): a fault is on the record of its own only.
    if (connection instanceof FaultAwareConnection) {
      connection.injected = undefined;
      connection.committing = false;
    }
    return this.#run(() => {
      this.#faults?.('begin');
      return this.#inner.beginTransaction(this.#unwrap(connection), settings);
    });
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.#run(() => {
      if (connection instanceof FaultAwareConnection && connection.injected !== undefined)
        throw connection.injected;
      if (connection instanceof FaultAwareConnection) connection.committing = true;
      this.#faults?.('commit');
      return this.#inner.commitTransaction(this.#unwrap(connection));
    });
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const committing = connection instanceof FaultAwareConnection && connection.committing;
    if (connection instanceof FaultAwareConnection) connection.committing = false;
    try {
      await this.#inner.rollbackTransaction(this.#unwrap(connection));
    } catch (error) {
      // Kysely rolls back after any failure, a failed `commit` included, and throws the rollback's error in place of
      // the one that ended the transaction. On a connection that broke, the server ends the transaction itself (rolled
      // back, or committed when the `commit` had reached it), so the error the caller must see is the first one: a
      // commit's lost answer stays an outcome to ask the store about (docs/decisions/0011-store-faults.md).
      if (committing && connectionBroke(error)) return;
      // SQLite rolls a transaction back by itself when a statement or the commit fails for a full disk or an I/O
      // error (SQLite documentation, "Response To Errors Within A Transaction"): the rollback then finds none, and its
      // error must not take the place of the store's own (`store_unavailable`, so the caller waits it out).
      if (transactionAlreadyEnded(error)) return;
      throw classified(error, false);
    }
  }

  async savepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    const inner = this.#inner;
    if (!inner.savepoint) throw new Error('the driver has no savepoints');
    const save = inner.savepoint.bind(inner);
    await this.#run(() => save(this.#unwrap(connection), name, compileQuery));
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    const inner = this.#inner;
    if (!inner.rollbackToSavepoint) throw new Error('the driver has no savepoints');
    const rollback = inner.rollbackToSavepoint.bind(inner);
    await this.#run(() => rollback(this.#unwrap(connection), name, compileQuery));
    // Back to a savepoint: what failed after it is undone with it.
    if (connection instanceof FaultAwareConnection) connection.injected = undefined;
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    const inner = this.#inner;
    if (!inner.releaseSavepoint) throw new Error('the driver has no savepoints');
    const release = inner.releaseSavepoint.bind(inner);
    await this.#run(() => release(this.#unwrap(connection), name, compileQuery));
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#unwrap(connection));
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}
