import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { openStore } from '../../src/store/database.ts';
import { databaseUrl, migratedPostgresDatabase, TEMPLATE_SCHEMA, type TestStore } from './store.ts';

/**
 * A PostgreSQL database of its own for a store-fault test (`parley_outage_<hex>`, created on the server of
 * TEST_DATABASE_URL and dropped after), so the test can terminate its backends and refuse its connections without
 * touching the shared `test` database. The fault commands run on a connection to the TEST_DATABASE_URL database.
 */
export interface OutageDatabase {
  /** The database's name. */
  name: string;
  /** A migrated test store on it (for seeding and reading rows; its pool is faulted too). */
  testStore: TestStore;
  /** Refuses new connections (`ALTER DATABASE … ALLOW_CONNECTIONS false`) and terminates every backend on it. */
  takeDown(): Promise<number>;
  /** Allows connections again. */
  bringBack(): Promise<void>;
  /** Closes the test store and drops the database (connections allowed and terminated first). */
  drop(): Promise<void>;
}

/**
 * Creates a fresh database `parley_outage_<hex>` next to TEST_DATABASE_URL's, a copy of the migrated template of
 * test/support/store.ts (its tables in schema `parley_test`).
 * @throws when TEST_DATABASE_URL is not set or the server refuses CREATE DATABASE.
 */
export async function createOutageDatabase(): Promise<OutageDatabase> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) throw new Error('TEST_DATABASE_URL is not set');
  const name = `parley_outage_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  admin.on('error', () => undefined);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} TEMPLATE ${await migratedPostgresDatabase(adminUrl)}`);
  const database: DatabaseConfig = { dialect: 'postgres', url: databaseUrl(adminUrl, name) };
  const store = await openStore(database, { schema: TEMPLATE_SCHEMA, poolSize: 3 });
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-outage-'));
  const terminate = async () =>
    (
      await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [name],
      )
    ).rowCount ?? 0;
  return {
    name,
    testStore: {
      store,
      database,
      schema: TEMPLATE_SCHEMA,
      dataDir,
      cleanup: async () => {
        await store.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    },
    async takeDown() {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      return terminate();
    },
    async bringBack() {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    },
    async drop() {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await store.destroy().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
      await terminate();
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.end();
    },
  };
}
