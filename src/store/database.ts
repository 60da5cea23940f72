import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, type SqliteDatabase, SqliteDialect, sql } from 'kysely';
import { LRUCache } from 'lru-cache';
import type pg from 'pg';
import type { DatabaseConfig } from '../config/config.ts';
import { DomainError } from '../domain/errors.ts';
import { faultAwareDialect, type StoreFaultHook } from './fault-aware-dialect.ts';
import { markPipelinedCommits } from './last-statement.ts';
import { isSqliteBusy, StoreTooNewError, sqliteMigrationDb, useForMigrations } from './migrate.ts';
import { ANSWER_TIMEOUT_MS, AnswerWatch, useAnswerWatch } from './pg-answers.ts';
import { currentSchemaDialect } from './pg-introspection.ts';
import { namedStatementPool } from './pg-statements.ts';
import type { Database } from './schema.ts';
import { type CheckpointReport, WalCheckpoints } from './wal-checkpoints.ts';
import { sqliteWriteDb, useForWrites } from './write-lock.ts';

export {
  isInitialised,
  isMigrated,
  LOCK_WAIT_MESSAGE,
  type MigrateOptions,
  migrateToLatest,
  StoreTooNewError,
} from './migrate.ts';

/** An open store: the Kysely handle, which dialect backs it, and how to close it. */
export interface Store {
  db: Kysely<Database>;
  dialect: DatabaseConfig['dialect'];
  /** PostgreSQL schema the store lives in: the one named at open, else the connection's current schema. */
  schema: string | undefined;
  /**
   * PostgreSQL: the connection pool's usage, read live (docs/decisions/0080-pool-size.md); absent on SQLite, which
   * has one connection and no pool.
   */
  pool?: PoolUsage;
  /** Closes every connection; the store cannot be used afterwards. */
  destroy(): Promise<void>;
}

/**
 * A PostgreSQL pool's usage at the moment each field is read (docs/decisions/0080-pool-size.md): connections, not
 * bytes. `busy` is `total - idle`, the connections a statement or a transaction holds.
 */
export interface PoolUsage {
  /** Most connections the pool opens (`DATABASE_POOL_SIZE`). */
  readonly max: number;
  /** Connections open now, busy or idle. */
  readonly total: number;
  /** Open connections no one holds. */
  readonly idle: number;
  /** Callers waiting for a connection because all `max` are busy. */
  readonly waiting: number;
}

/** Options for {@link openStore}. */
export interface OpenStoreOptions {
  /** PostgreSQL only: a schema to create and use (tests isolate themselves this way). */
  schema?: string;
  /**
   * PostgreSQL: most connections of the pool, overriding the configuration's `poolSize` (tests and benchmarks; the
   * service takes it from `DATABASE_POOL_SIZE`). Default: the configuration's, else {@link DEFAULT_POOL_SIZE}.
   */
  poolSize?: number;
  /**
   * Where pool and connection errors are reported, and SQLite's checkpoint thread failing (default: ignored;
   * `createServices` passes its logger).
   */
  onConnectionError?: (error: Error) => void;
  /**
   * PostgreSQL: called once when statements stop being prepared because a pooler switches the server session
   * under a connection (docs/decisions/0055-named-statements.md); given the error that showed it.
   */
  onSessionSwitch?: (error: Error) => void;
  /** SQLite: told each background checkpoint's figures (tests; docs/decisions/0057-background-checkpoints.md). */
  onCheckpoint?: (report: CheckpointReport) => void;
  /** Test-only fault hook (src/store/fault-aware-dialect.ts); never set from configuration. */
  faults?: StoreFaultHook;
  /**
   * Test-only hook called after each query the store carried out; throwing fails the query with its work kept, as a
   * connection lost between a commit and its answer (src/store/fault-aware-dialect.ts `faultAwareDialect`). Never
   * set from configuration.
   */
  lostAnswers?: StoreFaultHook;
}

/**
 * How long taking a new PostgreSQL connection may take before the query fails as `store_unavailable`, ms: a
 * server that does not answer (a network partition) must not hold requests indefinitely.
 */
export const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Connections a PostgreSQL pool holds at most when neither `DATABASE_POOL_SIZE` nor `OpenStoreOptions.poolSize` says
 * otherwise (docs/decisions/0080-pool-size.md): on the 2-core machine of docs/benchmarks.md, 4 gave the delivery
 * burst about a fifth less and 20 nothing more.
 */
export const DEFAULT_POOL_SIZE = 10;

/**
 * Opens the store described by `config` (docs/decisions/0024-engines-and-data-flow.md): better-sqlite3 in WAL mode
 * for SQLite, its temporary storage in memory (docs/decisions/0069-sqlite-temp-store-in-memory.md) and its
 * checkpoints in a worker thread (docs/decisions/0057-background-checkpoints.md); a `pg` pool for
 * PostgreSQL (int8 read as JavaScript numbers). Does not migrate; call {@link migrateToLatest}.
 * @throws when the SQLite file cannot be created or PostgreSQL refuses the first connection.
 */
export async function openStore(config: DatabaseConfig, options: OpenStoreOptions = {}): Promise<Store> {
  if (config.dialect === 'sqlite') {
    if (config.path !== ':memory:') mkdirSync(dirname(config.path), { recursive: true });
    const sqlite = new SQLite(config.path);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    // Statement journals and transient tables in memory, never in temporary files: a turn's group statement
    // changes more pages than SQLite keeps in memory before spilling, and each spill created, wrote and deleted a
    // file (docs/decisions/0069-sqlite-temp-store-in-memory.md).
    sqlite.pragma('temp_store = MEMORY');
    // The log keeps the size a burst gave it when it starts over (cut back only above 256 MiB, more than the safety
    // threshold lets it reach), so the next burst writes over it instead of growing it again; the checkpoint thread
    // empties the file once the store has been idle (docs/decisions/0070-wal-kept-while-busy.md).
    sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    // Checkpoints run in a worker thread, off the event loop, once the log holds 100 pages
    // (docs/decisions/0057-background-checkpoints.md, docs/decisions/0066-checkpoint-thread-on-demand.md).
    const checkpoints =
      config.path === ':memory:'
        ? undefined
        : WalCheckpoints.start(sqlite, config.path, {
            onFailure: options.onConnectionError,
            onReport: options.onCheckpoint,
          });
    const statements = cachingStatements(sqlite);
    const dialect = new SqliteDialect({ database: statements });
    const db = new Kysely<Database>({
      dialect: faultAwareDialect(dialect, options.faults, options.lostAnswers),
    });
    // The migrator's handle on the same connection (it never closes it): its migrations run in one transaction.
    const migrationDb = sqliteMigrationDb(statements, options.faults, options.lostAnswers);
    // A command's writes in one transaction that waits for the write lock (src/store/write-lock.ts).
    const writeDb = sqliteWriteDb(statements, options.faults, options.lostAnswers);
    const store: Store = {
      db,
      dialect: 'sqlite',
      schema: undefined,
      destroy: async () => {
        await checkpoints?.stop();
        await migrationDb.destroy();
        await writeDb.destroy();
        await db.destroy();
        // Kysely closes the connection only if `db` ran a query; a store that only migrated closes it here.
        if (sqlite.open) sqlite.close();
      },
    };
    useForMigrations(store, migrationDb);
    useForWrites(store, writeDb);
    return store;
  }
  // `pg` is loaded only for a PostgreSQL store: the embedded default, and every command-line call on it, skip its
  // modules (55–72 ms of the 580–620 ms a `parley org list` takes on the 2-core benchmark machine).
  const { default: pg } = await import('pg');
  const onConnectionError = options.onConnectionError ?? (() => undefined);
  const schema = options.schema;
  if (schema !== undefined && !/^[a-z_][a-z0-9_]*$/.test(schema))
    throw new Error(`bad schema name ${schema}`);
  const types = {
    getTypeParser: (oid: number, format?: 'text' | 'binary') =>
      oid === 20 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format ?? 'text'),
  };
  if (schema !== undefined) {
    const client = new pg.Client({
      connectionString: config.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    // An error event with no listener would end the process (Node's EventEmitter rule).
    client.on('error', (error: Error) => onConnectionError(error));
    await client.connect();
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    } finally {
      await client.end();
    }
  }
  const poolSize = options.poolSize ?? config.poolSize ?? DEFAULT_POOL_SIZE;
  const pool = new pg.Pool({
    connectionString: config.url,
    max: poolSize,
    // Lets a transaction's `begin` go out with its first statement (docs/decisions/0062-pipelined-begin.md).
    pipeline: true,
    types,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(schema === undefined ? {} : { options: `-c search_path=${schema}` }),
  });
  // A connection whose server stops answering is closed (docs/decisions/0011-store-faults.md, A store that stops
  // answering) instead of holding its statements until the kernel gives up on it.
  const answers = new AnswerWatch(config.answerTimeoutMs ?? ANSWER_TIMEOUT_MS, onConnectionError);
  // Store faults never end the process (docs/decisions/0011-store-faults.md). The pool emits 'error' for an idle
  // client the server closed (a terminated backend, a restart) and drops that client; a client checked out
  // between two queries of a transaction emits 'error' itself: each gets a listener, and its next query fails
  // as `store_unavailable`. A lost connection is replaced by the pool on the next query.
  pool.on('error', (error: Error, client: pg.PoolClient) => {
    if (!answers.closed(client)) onConnectionError(error);
  });
  pool.on('connect', (client: pg.PoolClient) => {
    // One report for a connection the watch closed: the watch's (it names the silence).
    client.on('error', (error: Error) => {
      if (!answers.closed(client)) onConnectionError(error);
    });
    answers.attach(client);
  });
  // Statements with parameters run as named prepared statements unless turned off for a pooler in transaction
  // mode, by the setting or on the first sign of one (docs/decisions/0055-named-statements.md).
  const named = namedStatementPool(pool, {
    naming: config.preparedStatements !== false,
    ...(schema === undefined ? {} : { schema }),
    ...(options.onSessionSwitch === undefined ? {} : { onSessionSwitch: options.onSessionSwitch }),
  });
  const db = new Kysely<Database>({
    dialect: faultAwareDialect(
      currentSchemaDialect(new PostgresDialect({ pool: named })),
      options.faults,
      options.lostAnswers,
    ),
  });
  // A transaction's last statement may go unawaited: its commit is written behind it (docs/decisions/0063-pipelined-commit.md).
  markPipelinedCommits(db);
  // The schema the tables live in: the one named, else the connection's own (`search_path`, which a
  // DATABASE_URL may set with `?options=-c search_path=…`). The migrator is told it, so it never mistakes the
  // migration table of another schema in the same database for this store's.
  const current = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db);
  const store: Store = {
    db,
    dialect: 'postgres',
    schema: schema ?? current.rows[0]?.schema ?? undefined,
    pool: {
      max: poolSize,
      get total() {
        return pool.totalCount;
      },
      get idle() {
        return pool.idleCount;
      },
      get waiting() {
        return pool.waitingCount;
      },
    },
    destroy: () => db.destroy(),
  };
  useAnswerWatch(store, answers);
  return store;
}

/**
 * Size the SQLite write-ahead log file is cut back to when it starts over, bytes (`journal_size_limit`): 256 MiB,
 * above the size where the service connection's safety threshold checkpoints it (`SAFETY_CHECKPOINT_PAGES` frames
 * of 4 KiB pages, about 197 MiB), so a log that starts over after ordinary writes keeps its size; one that a long
 * transaction took past 256 MiB is cut back to it (docs/decisions/0070-wal-kept-while-busy.md).
 */
export const WAL_SIZE_LIMIT_BYTES = 256 * 1024 * 1024;

/** Prepared statements kept per SQLite connection (least recently used dropped first). */
export const STATEMENT_CACHE_SIZE = 500;

/**
 * The SQLite connection as Kysely sees it, with prepared statements reused by SQL text. Kysely's driver calls
 * `prepare` for every query; compiling the same SQL again was the largest single cost of a send request
 * (`npm run bench` profile). A statement is safe to reuse: Kysely runs one query at a time on the connection,
 * parameters are bound per call, and SQLite re-prepares a statement itself after a schema change. The cache is
 * `lru-cache` (least recently used dropped first): its hit is a lookup and a few array writes, where a `Map` kept in
 * use order moved each hit's entry (a delete and an insert, about 1 % of a delivery's CPU; docs/benchmarks.md).
 */
export function cachingStatements(sqlite: SQLite.Database): SqliteDatabase {
  const cache = new LRUCache<string, SQLite.Statement>({ max: STATEMENT_CACHE_SIZE });
  return {
    close: () => sqlite.close(),
    prepare(text: string) {
      let statement = cache.get(text);
      if (statement === undefined) {
        statement = sqlite.prepare(text);
        cache.set(text, statement);
      }
      return statement;
    },
  };
}

/**
 * The current time as RFC 3339 UTC with milliseconds and `Z`, the form the API shows
 * (docs/decisions/0001-envelope-and-error-codes.md); the store's columns hold epoch ms
 * (docs/decisions/0027-times-as-epoch-ms.md).
 */
export function nowIso(clock: () => number = Date.now): string {
  return new Date(clock()).toISOString();
}

/** Where a store lives, for messages: the SQLite file, or the PostgreSQL URL with its password masked. */
export function describeStore(config: DatabaseConfig): string {
  if (config.dialect === 'sqlite') return `SQLite file ${config.path}`;
  let shown = config.url;
  try {
    const url = new URL(config.url);
    if (url.password !== '') url.password = '***';
    shown = url.toString();
  } catch {
    shown = config.url.replace(/:[^:@/]*@/, ':***@');
  }
  return `PostgreSQL database ${shown}`;
}

/**
 * One line saying why the store could not be opened and which setting fixes it, for a start failure
 * (docs/deploy.md "Start-up errors"): the store as {@link describeStore} shows it (password masked), what went
 * wrong, and `DATABASE_URL` / `DATA_DIR` to change. Recognises PostgreSQL's SQLSTATEs 3D000 (no such database),
 * 28P01/28000 (sign-in refused), 3F000 (no such schema) and unreachable servers; SQLite's CANTOPEN/READONLY, and
 * BUSY/LOCKED (another process holds the write lock: named as such, not as a setting to change).
 */
export function storeFailure(config: DatabaseConfig, failure: unknown): string {
  const store = describeStore(config);
  if (failure instanceof StoreTooNewError) return `cannot use ${store}: ${failure.message}`;
  // A connection failure arrives wrapped as `store_unavailable` (store/faults.ts): name the driver's own error.
  const error =
    failure instanceof DomainError && failure.code === 'store_unavailable' && failure.cause !== undefined
      ? failure.cause
      : failure;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (config.dialect === 'sqlite') {
    // Not a setting to change: another process (an operator's sqlite3 session, a stuck CLI command) keeps the file's
    // write lock, and the store cannot be written until it lets go.
    if (isSqliteBusy(error))
      return `${store} is locked by another process (${String(code)}): another process holds the store's write lock; end it (a sqlite3 session, a running parley command) or wait for it, then try again`;
    if (code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY' || code === 'EACCES' || code === 'EROFS')
      return `cannot open ${store} (${String(code)}): set DATA_DIR (or DATABASE_URL=sqlite:PATH) to a writable place`;
    return `cannot open ${store}: ${message}: check DATA_DIR and DATABASE_URL`;
  }
  switch (code) {
    case '3D000':
      return `${store} does not exist: create it (createdb) or set DATABASE_URL to an existing database`;
    case '28P01':
    case '28000':
      return `${store} refused the sign-in (${message}): fix the user or password in DATABASE_URL`;
    case '3F000':
      return `${store}: ${message}: create the schema or fix search_path in DATABASE_URL`;
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ECONNRESET':
      return `cannot reach ${store} (${code}): start PostgreSQL or set DATABASE_URL to a reachable server`;
    default:
      return `cannot open ${store}: ${message}: check DATABASE_URL`;
  }
}
