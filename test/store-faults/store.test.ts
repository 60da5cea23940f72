/**
 * A store that cannot be reached, at the HTTP edge and in the PostgreSQL pool (docs/decisions/0011-store-faults.md):
 * requests that need the store answer 503 `store_unavailable` with `Retry-After` and no `retryAfter` in the
 * envelope, /readyz answers 503 and then 200 again; on PostgreSQL a terminated idle connection is reported, never
 * thrown, and the next query gets a new one.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { DomainError, STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { statusOf } from '../../src/http/errors.ts';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { createTestApp } from '../support/app.ts';
import { createOutageDatabase } from '../support/outage-database.ts';
import { testDialects } from '../support/store.ts';

describe('store unavailable at the HTTP edge (sqlite, injected fault)', () => {
  it('503 with Retry-After and the envelope while the store fails; /readyz 503 then 200', async () => {
    assert.equal(statusOf('store_unavailable'), 503);
    let fault: Error | undefined;
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-store-fault-'));
    const database: DatabaseConfig = { dialect: 'sqlite', path: join(dataDir, 'parley.db') };
    const store = await openStore(database, {
      faults: () => {
        if (fault) throw fault;
      },
    });
    await migrateToLatest(store);
    const testStore = {
      store,
      database,
      schema: undefined,
      dataDir,
      cleanup: async () => {
        await store.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
    const t = await createTestApp({ testStore });
    try {
      assert.equal((await t.call('GET', '/readyz')).status, 200);
      // The key is cached by now; the store answers nothing.
      assert.equal((await t.call('GET', '/v1/session/status')).status, 200);
      for (const code of ['SQLITE_BUSY', 'SQLITE_IOERR_READ']) {
        fault = new SQLite.SqliteError('the store fails', code);
        const answer = await t.call('GET', '/v1/session/status');
        assert.equal(answer.status, 503, code);
        assert.deepEqual(answer.body, { error: { code: 503, message: STORE_UNAVAILABLE } });
        assert.equal(answer.headers['retry-after'], '5');
        const ready = await t.call('GET', '/readyz');
        assert.deepEqual(
          { status: ready.status, body: ready.body, retryAfter: ready.headers['retry-after'] },
          { status: 503, body: { error: { code: 503, message: 'store is not ready' } }, retryAfter: '5' },
        );
      }
      // A constraint error is not an outage: it stays what it was.
      fault = new SQLite.SqliteError('UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE');
      await assert.rejects(
        sql`select 1`.execute(store.db),
        (error: unknown) => !(error instanceof DomainError),
      );
      fault = undefined;
      assert.equal((await t.call('GET', '/readyz')).status, 200);
      assert.equal((await t.call('GET', '/v1/session/status')).status, 200);
    } finally {
      await t.close();
      await testStore.cleanup();
    }
  });
});

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`PostgreSQL connections terminated by the server (${dialect})`, () => {
    it('idle connections terminated: reported, not thrown; queries fail as store_unavailable while refused, then work', async () => {
      const database = await createOutageDatabase();
      const reported: Error[] = [];
      const store = await openStore(database.testStore.database, {
        poolSize: 2,
        onConnectionError: (error) => reported.push(error),
      });
      try {
        // Two idle connections in the pool.
        await Promise.all([
          sql`select pg_sleep(0.05)`.execute(store.db),
          sql`select pg_sleep(0.05)`.execute(store.db),
        ]);
        const terminated = await database.takeDown();
        assert.ok(terminated >= 2, `terminated ${terminated}`);
        const deadline = Date.now() + 10_000;
        while (reported.length < 2 && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 25));
        assert.ok(reported.length >= 2, `reported ${reported.length}`);
        assert.match(reported[0]?.message ?? '', /terminating connection due to administrator command/);
        await assert.rejects(
          sql`select 1`.execute(store.db),
          (error: unknown) => error instanceof DomainError && error.code === 'store_unavailable',
        );
        await database.bringBack();
        // A pooled connection whose end the pool has not yet seen may fail one more query, as store_unavailable
        // (a 503 the caller retries); the pool replaces it, and the store answers again.
        let result: { one: number }[] | undefined;
        const back = Date.now() + 10_000;
        while (result === undefined && Date.now() < back) {
          try {
            result = (await sql<{ one: number }>`select 1 as one`.execute(store.db)).rows;
          } catch (error) {
            assert.ok(error instanceof DomainError && error.code === 'store_unavailable', String(error));
            await new Promise((resolve) => setTimeout(resolve, 25));
          }
        }
        assert.deepEqual(result, [{ one: 1 }]);
      } finally {
        await store.destroy();
        await database.drop();
      }
    });
  });
}
