import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  Kysely,
  Migrator,
  SqliteAdapter,
  type SqliteDatabase,
  SqliteDialect,
  sql,
} from 'kysely';
import type { Store } from './database.ts';
import { faultAwareDialect, type StoreFaultHook } from './fault-aware-dialect.ts';
import { migrationProvider, migrations } from './migrations/index.ts';
import { suspendAnswerWatch } from './pg-answers.ts';
import type { Database } from './schema.ts';

/**
 * A Kysely handle on a SQLite store's connection (`statements`, the store's own; this handle never closes it), its
 * dialect shaped by `shape` (how its transactions begin and end), with the store's test-only fault hooks. The
 * migrator's handle ({@link sqliteMigrationDb}) and a CLI command's (write-lock.ts `sqliteWriteDb`) are two shapes.
 */
export function sqliteHandleOn(
  statements: SqliteDatabase,
  shape: (dialect: Dialect) => Dialect,
  faults?: StoreFaultHook,
  lostAnswers?: StoreFaultHook,
): Kysely<Database> {
  return new Kysely<Database>({
    dialect: faultAwareDialect(
      shape(
        new SqliteDialect({
          database: { prepare: (text) => statements.prepare(text), close: () => undefined },
        }),
      ),
      faults,
      lostAnswers,
    ),
  });
}

/**
 * The migrator's handle on a SQLite store's connection (`statements`, the store's own; this handle never closes it),
 * with the store's test-only fault hooks: its migrations run in one transaction ({@link transactionalSqlite}).
 */
export function sqliteMigrationDb(
  statements: SqliteDatabase,
  faults?: StoreFaultHook,
  lostAnswers?: StoreFaultHook,
): Kysely<Database> {
  return sqliteHandleOn(statements, transactionalSqlite, faults, lostAnswers);
}

/**
 * How often a migration that keeps waiting for SQLite's write lock says so again, in attempts: each attempt waits
 * the connection's busy_timeout (5 s), so about once a minute.
 */
const LOCK_WAIT_REPORT_EVERY = 12;

/**
 * Whether `error` is SQLite's "database is locked" (another connection holds the lock past busy_timeout), as the
 * driver raises it or wrapped as the cause of a `store_unavailable` (src/store/faults.ts).
 */
export function isSqliteBusy(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 3; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)(_|$)/.test(code)) return true;
    current = current.cause;
  }
  return false;
}

/** Makes `db` (from {@link sqliteMigrationDb}) the handle {@link migrateToLatest} migrates SQLite store `store` with. */
export function useForMigrations(store: Store, db: Kysely<Database>): void {
  sqliteMigrationDbs.set(store, db);
}

/** SQLite stores' migration handles (see {@link transactionalSqlite}), by store. */
const sqliteMigrationDbs = new WeakMap<Store, Kysely<Database>>();

/**
 * SQLite's adapter, saying what SQLite does: its schema changes are transactional, so Kysely's migrator wraps its run
 * in one.
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/**
 * `dialect` (SQLite) for the migrator: Kysely's own SQLite adapter says its schema changes are not transactional,
 * so its migrator ran each statement of a migration as its own commit, and a start killed (or failing: a full disk)
 * between two statements left the store half-migrated, the migration unrecorded, and every later start failing on
 * the statements already applied ("table … already exists", "no such index"). With this adapter the pending
 * migrations and their records commit together or not at all. Its transactions begin `IMMEDIATE`: a second process
 * migrating the same file (a CLI command during a start) waits for the first and then reads the migrations it
 * recorded, instead of both reading the same state and one failing on the write.
 */
function transactionalSqlite(dialect: Dialect): Dialect {
  return {
    createDriver: (): Driver => {
      const driver = dialect.createDriver();
      return {
        init: () => driver.init(),
        acquireConnection: () => driver.acquireConnection(),
        beginTransaction: async (connection: DatabaseConnection) => {
          await connection.executeQuery(CompiledQuery.raw('begin immediate'));
        },
        commitTransaction: (connection) => driver.commitTransaction(connection),
        rollbackTransaction: (connection) => driver.rollbackTransaction(connection),
        releaseConnection: (connection) => driver.releaseConnection(connection),
        destroy: () => driver.destroy(),
      };
    },
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createAdapter: () => new TransactionalDdlSqliteAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
  };
}

/** Options of {@link migrateToLatest}. */
export interface MigrateOptions {
  /**
   * SQLite: told when the migration waits for the file's write lock, which another process holds (another version
   * migrating, an operator's sqlite3 session), at first and then about once a minute; the wait goes on until the
   * lock is free (docs/deploy.md "Upgrading").
   */
  onLockWait?: () => void;
}

/** The message a start or a CLI command gives while its migration waits for SQLite's write lock. */
export const LOCK_WAIT_MESSAGE =
  "another process holds the store's write lock (a migration?): waiting for it to finish";

/**
 * Applies every pending migration (run at boot; concurrent callers on PostgreSQL are serialised by Kysely's lock).
 * The pending migrations apply in one transaction on both dialects: a start killed in the middle leaves the store
 * as it was. On SQLite, a store whose recorded migrations are exactly this version's is left alone after one read,
 * so a start or a CLI command takes no write lock when there is nothing to migrate (another process may hold it for
 * long); foreign keys are off for a run (SQLite ignores the setting inside a transaction, and a migration
 * rebuilding a parent table would otherwise cascade its drop to the children; 0015 checks them itself).
 * @throws the first migration error, after logging nothing (the caller decides).
 */
export async function migrateToLatest(store: Store, options: MigrateOptions = {}): Promise<void> {
  const migrationDb = sqliteMigrationDbs.get(store);
  if (migrationDb === undefined) {
    // A migration may wait for another node's (its lock) or build an index for longer than a silent connection is
    // given (src/store/pg-answers.ts): its statements are not watched.
    const resume = suspendAnswerWatch(store);
    try {
      const { error } = await migratorFor(store).migrateToLatest();
      if (error) throw migrationFailure(error);
    } finally {
      resume();
    }
    return;
  }
  if (await sqliteUpToDate(migrationDb)) return;
  const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(migrationDb);
  const foreignKeys = pragma.rows[0]?.foreign_keys === 1;
  await sql`pragma foreign_keys = off`.execute(migrationDb);
  try {
    // Another process may hold the write lock for longer than busy_timeout (another version migrating, an operator's
    // sqlite3 session): the run (its migration tables' creation, then its transaction) is tried again until the lock
    // is free, saying so, rather than fail the start. A failed attempt changed nothing: its steps are idempotent and
    // its transaction never began.
    for (let attempt = 0; ; attempt++) {
      const { error } = await new Migrator({
        db: migrationDb,
        provider: migrationProvider,
      }).migrateToLatest();
      if (error === undefined) return;
      if (!isSqliteBusy(error)) throw migrationFailure(error);
      if (attempt % LOCK_WAIT_REPORT_EVERY === 0) options.onLockWait?.();
    }
  } finally {
    if (foreignKeys) await sql`pragma foreign_keys = on`.execute(migrationDb);
  }
}

/**
 * Whether the SQLite store records exactly this version's migrations, read without a write lock (WAL readers do not
 * wait for writers). False when the table is missing, a migration is pending or an unknown one is recorded (the
 * migrator then runs, and says {@link StoreTooNewError} for the last).
 */
async function sqliteUpToDate(db: Kysely<Database>): Promise<boolean> {
  const table = await sql<{ found: number }>`
    select count(*) as found from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(
    db,
  );
  if (table.rows[0]?.found !== 1) return false;
  const rows = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  const applied = new Set(rows.rows.map((row) => row.name));
  const known = Object.keys(migrations);
  return applied.size === known.length && known.every((name) => applied.has(name));
}

/** The store records a migration this version does not have: a newer parley migrated it. */
export class StoreTooNewError extends Error {
  readonly migration: string;
  constructor(migration: string) {
    super(
      `the store was migrated by a newer version of parley (migration ${migration}, unknown to this version): run that version or a newer one, or restore the backup taken before the upgrade`,
    );
    this.name = 'StoreTooNewError';
    this.migration = migration;
  }
}

/** The migrator's error as thrown: Kysely's "previously executed migration … is missing" as a {@link StoreTooNewError}. */
function migrationFailure(error: unknown): Error {
  const missing =
    error instanceof Error ? /previously executed migration (\S+) is missing/.exec(error.message) : null;
  if (missing?.[1] !== undefined) return new StoreTooNewError(missing[1]);
  return error instanceof Error ? error : new Error(String(error));
}

/** True when every known migration has been applied (readiness check, docs/decisions/0023-operations.md). */
export async function isMigrated(store: Store): Promise<boolean> {
  const applied = await migratorFor(store).getMigrations();
  return (
    applied.length === Object.keys(migrations).length && applied.every((m) => m.executedAt !== undefined)
  );
}

/**
 * True when the store holds parley's tables: at least one migration was applied (Kysely's `kysely_migration`
 * table, looked up in the store's own schema on PostgreSQL). False on a new SQLite file or a PostgreSQL
 * database whose migrations were never run.
 */
export async function isInitialised(store: Store): Promise<boolean> {
  const applied = await migratorFor(store).getMigrations();
  return applied.some((migration) => migration.executedAt !== undefined);
}

function migratorFor(store: Store): Migrator {
  return new Migrator({
    db: store.db,
    provider: migrationProvider,
    ...(store.schema === undefined ? {} : { migrationTableSchema: store.schema }),
  });
}
