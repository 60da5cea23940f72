import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { migrateToLatest, openStore, type Store } from '../../src/store/database.ts';

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
  /** PostgreSQL schema of this store (pass to openStore to share it from a second "process"). */
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
 * Creates a fresh store: a new SQLite file in a temp folder (a copy of a migrated one), or a new PostgreSQL schema.
 * The temp folder doubles as `DATA_DIR` for the master key file.
 */
export async function createTestStore(dialect: TestDialect): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-test-'));
  if (dialect === 'sqlite') {
    const database: DatabaseConfig = { dialect: 'sqlite', path: join(dataDir, 'parley.db') };
    copyFileSync(await migratedSqliteFile(), database.path);
    const store = await openStore(database);
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
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const database: DatabaseConfig = { dialect: 'postgres', url };
  const store = await openStore(database, { schema, poolSize: 5 });
  await migrateToLatest(store);
  return {
    store,
    database,
    schema,
    dataDir,
    // The schema is not dropped here: a DROP SCHEMA while another test process's migrator introspects every
    // schema fails that process ("schema … does not exist"). The runner (scripts/test.js) drops every `t_`
    // schema before and after the run, when no test process is running.
    cleanup: async () => {
      await store.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
