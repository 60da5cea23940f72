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
import { classified, codeOf, connectionBroke, transactionAlreadyEnded } from './faults.ts';

/*
 * The Kysely dialect wrapper of store faults (docs/decisions/0011-store-faults.md): every query, transaction statement
 * and connection acquisition passes through it, and leaves with its error classified by src/store/faults.ts.
 */

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
