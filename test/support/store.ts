import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { migrateToLatest, openStore, type Store } from '../../src/store/database.ts';
import type { StoreFaultHook } from '../../src/store/fault-aware-dialect.ts';

/** A dialect the store suites run against: SQLite always, PostgreSQL when TEST_DATABASE_URL is set. */
export type TestDialect = 'sqlite' | 'postgres';

/** The dialects available in this run (store tests loop over these; the runner says which are not run). */
export function testDialects(): TestDialect[] {
  return process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

/** A migrated, isolated store plus its config and a cleanup that drops everything it made. */
export interface TestStore {
  store: Store;
  database: DatabaseConfig;
  /** PostgreSQL schema of this store (pass to openStore with `database` to share it from a second "process"). */
  schema: string | undefined;
  dataDir: string;
  cleanup(): Promise<void>;
}

/**
 * A SQLite file with every migration applied, made once per test process and copied for each SQLite test store:
 * migrating a new file took about 75 ms of CPU, a copy well under one. Closing the store that made it copied its
 * write-ahead log into the file and removed the log, so the file alone is the whole store.
 */
let sqliteTemplate: Promise<string> | undefined;

function migratedSqliteFile(): Promise<string> {
  sqliteTemplate ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-test-template-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'parley.db');
    const store = await openStore({ dialect: 'sqlite', path });
    await migrateToLatest(store);
    await store.destroy();
    if (existsSync(`${path}-wal`)) throw new Error(`the migrated template kept its log: ${path}-wal`);
    return path;
  })();
  return sqliteTemplate;
}

/**
 * Creates a fresh store: a new SQLite file in a temp folder (a copy of a migrated one), or a new PostgreSQL database
 * `t_<hex>` (a copy of a migrated one) whose tables live in schema `parley_test`.
 * The temp folder doubles as `DATA_DIR` for the master key file. `options.faults` is the store's test-only fault
 * hook (src/store/faults.ts `StoreFaultHook`), called with every statement's SQL text; `options.poolSize` the
 * PostgreSQL pool's most connections (default 5; SQLite has one).
 */
export async function createTestStore(
  dialect: TestDialect,
  options: { faults?: StoreFaultHook; poolSize?: number } = {},
): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-test-'));
  const faults = options.faults ? { faults: options.faults } : {};
  if (dialect === 'sqlite') {
    const database: DatabaseConfig = { dialect: 'sqlite', path: join(dataDir, 'parley.db') };
    copyFileSync(await migratedSqliteFile(), database.path);
    const store = await openStore(database, faults);
    return {
      store,
      database,
      schema: undefined,
      dataDir,
      cleanup: async () => {
        await store.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) throw new Error('TEST_DATABASE_URL is not set');
  const name = `t_${randomBytes(6).toString('hex')}`;
  await copyTemplate(adminUrl, name);
  const database: DatabaseConfig = { dialect: 'postgres', url: databaseUrl(adminUrl, name) };
  const store = await openStore(database, {
    schema: TEMPLATE_SCHEMA,
    poolSize: options.poolSize ?? 5,
    ...faults,
  });
  return {
    store,
    database,
    schema: TEMPLATE_SCHEMA,
    dataDir,
    // The drop is started, not awaited: PostgreSQL checkpoints at every DROP DATABASE, and the test need not wait for
    // it. One the process leaves behind (it exits first, or the drop fails) goes with the runner's sweep
    // (scripts/test.js drops every `t_` database before and after the run).
    cleanup: async () => {
      await store.destroy();
      rmSync(dataDir, { recursive: true, force: true });
      void withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).catch(
        () => undefined,
      );
    },
  };
}

/** The schema the tables of a PostgreSQL test store live in (named, so the stores exercise openStore's `schema`). */
export const TEMPLATE_SCHEMA = 'parley_test';

let postgresTemplate: Promise<string> | undefined;

/**
 * A PostgreSQL database with every migration applied, `parley_tpl_<digest of the migration files>`, made once on
 * the server of TEST_DATABASE_URL and copied by CREATE DATABASE … TEMPLATE for each PostgreSQL test store: migrating
 * a new schema cost the server about 400 ms of CPU (120 DDL statements), a copy a few milliseconds of CPU (and a
 * write of its 9 MB, which the server waits on). Processes that
 * start together build it once: an advisory lock serialises them, and it is built under a temporary name and
 * renamed when complete, so a template that exists is whole. The runner drops the templates before each run.
 * @returns the template's name
 * @throws what the server answered when the template could not be built (the next call tries again)
 */
export function migratedPostgresDatabase(adminUrl: string): Promise<string> {
  postgresTemplate ??= buildPostgresTemplate(adminUrl).catch((error: unknown) => {
    postgresTemplate = undefined; // the next store tries again
    throw error;
  });
  return postgresTemplate;
}

/**
 * Creates database `name` as a copy of {@link migratedPostgresDatabase}'s template. A template dropped meanwhile
 * (`3D000`: another test run's runner swept the server at its start, scripts/test.js) is built again once, so runs
 * started beside each other do not fail each other's stores.
 */
async function copyTemplate(adminUrl: string, name: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const template = await migratedPostgresDatabase(adminUrl);
    try {
      await withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
      return;
    } catch (error) {
      if (attempt >= 3 || (error as { code?: unknown }).code !== '3D000') throw error;
      postgresTemplate = undefined;
    }
  }
}

/** Builds the template of {@link migratedPostgresDatabase} unless it exists; resolves with its name. */
async function buildPostgresTemplate(adminUrl: string): Promise<string> {
  const name = `parley_tpl_${migrationsDigest()}`;
  await withAdmin(adminUrl, async (admin) => {
    await admin.query("select pg_advisory_lock(hashtext('parley test template'))");
    const found = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount !== 0) return;
    const building = `${name}_build`;
    await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${building}`);
    const store = await openStore(
      { dialect: 'postgres', url: databaseUrl(adminUrl, building) },
      { schema: TEMPLATE_SCHEMA, poolSize: 1 },
    );
    try {
      await migrateToLatest(store);
    } finally {
      await store.destroy();
    }
    await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
    // A session on the template would make every copy fail ("being accessed by other users"): none may open.
    await admin.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false IS_TEMPLATE true`);
  });
  return name;
}

/**
 * The first 12 hex digits of a SHA-256 over the migration files' names and contents (a new migration, a new
 * template).
 */
function migrationsDigest(): string {
  const dir = new URL('../../src/store/migrations/', import.meta.url);
  const hash = createHash('sha256');
  for (const file of readdirSync(dir).sort())
    hash
      .update(file)
      .update('\0')
      .update(readFileSync(new URL(file, dir)));
  return hash.digest('hex').slice(0, 12);
}

/** `url` with its database replaced by `name`. */
export function databaseUrl(url: string, name: string): string {
  const next = new URL(url);
  next.pathname = `/${name}`;
  return next.toString();
}

/** Runs `work` on a connection of its own to the TEST_DATABASE_URL database (session locks end with it). */
async function withAdmin<T>(adminUrl: string, work: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: adminUrl });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

/**
 * A check-constraint violation on table `relation` as PostgreSQL reports it: permanent (SQLSTATE class 23), never
 * retried (src/store/faults.ts), for a test's fault hook to throw in place of a statement.
 */
export function checkViolation(relation: string): Error {
  return Object.assign(new Error(`new row for relation "${relation}" violates check constraint`), {
    code: '23514',
  });
}

/**
 * The driver's error of a store that cannot answer right now, as a fault hook throws it: a busy SQLite file
 * (`SQLITE_BUSY`), or a PostgreSQL backend terminated by the server (SQLSTATE 57P01). Both are `store_unavailable`
 * (src/store/faults.ts) and tried again by the callers that wait out an unreachable store.
 */
export function storeOutage(dialect: TestDialect): Error {
  if (dialect === 'sqlite') return new SQLite.SqliteError('database is locked', 'SQLITE_BUSY');
  return Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
}
