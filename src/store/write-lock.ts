import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type SqliteDatabase,
  sql,
} from 'kysely';
import type { Store } from './database.ts';
import type { StoreFaultHook } from './fault-aware-dialect.ts';
import { isSqliteBusy, sqliteHandleOn } from './migrate.ts';
import type { Database } from './schema.ts';

/*
 * One command's writes as one SQLite transaction that first waits for the file's write lock
 * (docs/decisions/0109-cli-writes-wait-for-the-write-lock.md): `parley key create` beside a busy server, or beside an
 * operator's sqlite3 session, waits for the lock instead of failing after busy_timeout, and either all of its writes
 * are kept or none.
 */

/** Name of the savepoint a transaction of the command becomes inside the command's own transaction. */
const SAVEPOINT = 'parley_command_step';

/**
 * `dialect` (SQLite) with its transactions as savepoints: the handle runs inside a transaction of its own
 * ({@link withWriteLock}), in which SQLite refuses a `begin`, and the store's functions that open a transaction
 * (`db.transaction()`) then nest in it, their rollback undoing their own writes only.
 */
function savepointSqlite(dialect: Dialect): Dialect {
  return {
    createDriver: (): Driver => {
      const driver = dialect.createDriver();
      const raw = (connection: DatabaseConnection, text: string) =>
        connection.executeQuery(CompiledQuery.raw(text));
      return {
        init: () => driver.init(),
        acquireConnection: () => driver.acquireConnection(),
        beginTransaction: async (connection) => {
          await raw(connection, `savepoint ${SAVEPOINT}`);
        },
        commitTransaction: async (connection) => {
          await raw(connection, `release savepoint ${SAVEPOINT}`);
        },
        rollbackTransaction: async (connection) => {
          await raw(connection, `rollback to savepoint ${SAVEPOINT}`);
          await raw(connection, `release savepoint ${SAVEPOINT}`);
        },
        ...(driver.savepoint === undefined ? {} : { savepoint: driver.savepoint.bind(driver) }),
        ...(driver.rollbackToSavepoint === undefined
          ? {}
          : { rollbackToSavepoint: driver.rollbackToSavepoint.bind(driver) }),
        ...(driver.releaseSavepoint === undefined
          ? {}
          : { releaseSavepoint: driver.releaseSavepoint.bind(driver) }),
        releaseConnection: (connection) => driver.releaseConnection(connection),
        destroy: () => driver.destroy(),
      };
    },
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
  };
}

/**
 * The handle {@link withWriteLock} gives a command on a SQLite store's connection (`statements`, the store's own;
 * this handle never closes it), with the store's test-only fault hooks: its transactions are savepoints of the
 * command's transaction.
 */
export function sqliteWriteDb(
  statements: SqliteDatabase,
  faults?: StoreFaultHook,
  lostAnswers?: StoreFaultHook,
): Kysely<Database> {
  return sqliteHandleOn(statements, savepointSqlite, faults, lostAnswers);
}

/** SQLite stores' write handles ({@link sqliteWriteDb}), by store. */
const sqliteWriteDbs = new WeakMap<Store, Kysely<Database>>();

/** Makes `db` (from {@link sqliteWriteDb}) the handle {@link withWriteLock} runs SQLite store `store`'s writes on. */
export function useForWrites(store: Store, db: Kysely<Database>): void {
  sqliteWriteDbs.set(store, db);
}

/** Options of {@link withWriteLock}; times in milliseconds. */
export interface WriteLockOptions {
  /** Longest wait for the write lock before giving up with {@link WriteLockTimeout}. */
  waitMs: number;
  /** How long the wait goes on before `onWait` is told (once); never told when the lock comes sooner. */
  noticeAfterMs: number;
  /** Told once when the wait has lasted `noticeAfterMs`: another process holds the lock. */
  onWait?: () => void;
  /** The clock, epoch ms (tests). */
  now?: () => number;
}

/** The wait for SQLite's write lock lasted the whole {@link WriteLockOptions.waitMs}: nothing was written. */
export class WriteLockTimeout extends Error {
  /** How long it waited, milliseconds. */
  readonly waitedMs: number;
  constructor(waitedMs: number, options?: ErrorOptions) {
    super(`another process held the store's write lock for ${waitedMs} ms`, options);
    this.name = 'WriteLockTimeout';
    this.waitedMs = waitedMs;
  }
}

/**
 * Longest single wait for the lock, ms: the connection's busy_timeout is set to it (at most) while the lock is
 * asked for, so the wait can be told and bounded between two asks (better-sqlite3 waits without yielding).
 */
const LOCK_ASK_MS = 250;

/**
 * Runs `run` (a command's writes) on `store`. On SQLite, in one transaction that begins `IMMEDIATE`, taking the file's
 * write lock first: while another process holds it (the server writing, an operator's sqlite3 session) it is asked
 * for again until it is free, `onWait` told once the wait lasted `noticeAfterMs`, for at most `waitMs`; once held,
 * no statement of `run` waits for another writer (WAL readers never block it). `run`'s own transactions nest as
 * savepoints. A `run` that throws is rolled back whole, so a command never keeps half of its writes. On PostgreSQL,
 * `run` runs on the store's handle (row locks wait there without a bound).
 * @throws WriteLockTimeout when the lock stayed held for `waitMs` (nothing written); whatever `run` throws (its
 *   writes rolled back).
 */
export async function withWriteLock<T>(
  store: Store,
  options: WriteLockOptions,
  run: (db: Kysely<Database>) => Promise<T>,
): Promise<T> {
  const db = sqliteWriteDbs.get(store);
  if (db === undefined) return run(store.db);
  await beginImmediate(db, options);
  let result: T;
  try {
    result = await run(db);
  } catch (error) {
    await sql`rollback`.execute(db).catch(() => undefined);
    throw error;
  }
  try {
    await sql`commit`.execute(db);
  } catch (error) {
    // Left open, the transaction would be rolled back when the connection closes; said at once instead.
    await sql`rollback`.execute(db).catch(() => undefined);
    throw error;
  }
  return result;
}

/**
 * `begin immediate` on `db`, asked again while SQLITE_BUSY answers, each ask waiting at most {@link LOCK_ASK_MS}
 * (busy_timeout set for it, then set back).
 * @throws WriteLockTimeout after `options.waitMs`; any other error of the `begin`.
 */
async function beginImmediate(db: Kysely<Database>, options: WriteLockOptions): Promise<void> {
  const now = options.now ?? Date.now;
  const started = now();
  const deadline = started + options.waitMs;
  const pragma = await sql<{ timeout: number }>`pragma busy_timeout`.execute(db);
  const busyTimeout = pragma.rows[0]?.timeout ?? 0;
  let told = false;
  try {
    for (;;) {
      const left = Math.max(0, deadline - now());
      await sql.raw(`pragma busy_timeout = ${Math.min(LOCK_ASK_MS, left)}`).execute(db);
      try {
        await sql`begin immediate`.execute(db);
        return;
      } catch (error) {
        if (!isSqliteBusy(error)) throw error;
        const waited = now() - started;
        if (now() >= deadline) throw new WriteLockTimeout(waited, { cause: error });
        if (!told && waited >= options.noticeAfterMs) {
          told = true;
          options.onWait?.();
        }
      }
    }
  } finally {
    await sql.raw(`pragma busy_timeout = ${busyTimeout}`).execute(db);
  }
}
