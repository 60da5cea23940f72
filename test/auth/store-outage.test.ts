import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createOutageDatabase } from '../support/outage-database.ts';
import type { TestStore } from '../support/store.ts';
import { testDialects } from '../support/store.ts';

/**
 * Keys while the store cannot be reached (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0011-store-faults.md): a key the process has not verified yet is neither taken nor called invalid
 * (it cannot be read): 503 `store_unavailable` with `Retry-After`, never a 401 or a 500; the revocation look fails
 * quietly (logged) and the process goes on; once the store answers, the same key works, and a key revoked while the
 * look could not run is refused within a poll.
 */
interface Outage {
  testStore: TestStore;
  down(): Promise<void>;
  up(): Promise<void>;
  drop(): Promise<void>;
}

async function sqliteOutage(): Promise<Outage> {
  let fault: Error | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-key-outage-'));
  const database: DatabaseConfig = { dialect: 'sqlite', path: join(dataDir, 'parley.db') };
  const store = await openStore(database, {
    faults: () => {
      if (fault) throw fault;
    },
  });
  await migrateToLatest(store);
  const testStore: TestStore = {
    store,
    database,
    schema: undefined,
    dataDir,
    cleanup: async () => undefined,
  };
  return {
    testStore,
    down: async () => {
      fault = new SQLite.SqliteError('the store fails', 'SQLITE_IOERR_READ');
    },
    up: async () => {
      fault = undefined;
    },
    drop: async () => {
      await store.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function postgresOutage(): Promise<Outage> {
  const database = await createOutageDatabase();
  return {
    testStore: database.testStore,
    down: async () => {
      await database.takeDown();
    },
    up: () => database.bringBack(),
    drop: () => database.drop(),
  };
}

for (const dialect of testDialects()) {
  describe(`API keys while the store cannot be reached [${dialect}]`, () => {
    it('an unverified key is 503 with Retry-After, never 401 or 500; after the outage it works, a revoked one is refused', async () => {
      const outage = dialect === 'sqlite' ? await sqliteOutage() : await postgresOutage();
      let t: TestApp | undefined;
      try {
        t = await createTestApp({
          testStore: outage.testStore,
          plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
        });
        const app = t;
        const unseen = await app.newKey();
        const cached = await app.newKey();
        const status = async (key: string) =>
          app.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${key}` });
        for (let i = 0; i < 5; i += 1) assert.equal((await status(cached)).status, 200);
        await outage.down();
        for (const key of [unseen, cached]) {
          const answer = await status(key);
          assert.deepEqual(
            { status: answer.status, body: answer.body, retryAfter: answer.headers['retry-after'] },
            { status: 503, body: { error: { code: 503, message: STORE_UNAVAILABLE } }, retryAfter: '5' },
          );
        }
        // The revocation look runs every 50 ms here and fails throughout: the process goes on.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await outage.up();
        await eventually('the unseen key works', async () => (await status(unseen)).status === 200, 10_000);
        const { id } = await app.testStore.store.db
          .selectFrom('api_keys')
          .select('id')
          .where('prefix', '=', cached.slice(0, 12))
          .executeTakeFirstOrThrow();
        await app.testStore.store.db
          .updateTable('api_keys')
          .set({ revoked_at: app.clock() })
          .where('id', '=', id)
          .execute();
        await eventually(
          'the revoked key is refused',
          async () => (await status(cached)).status === 401,
          2000,
        );
      } finally {
        await t?.close();
        await outage.drop();
      }
    });
  });
}
