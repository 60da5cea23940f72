/**
 * Migration 0015 (docs/decisions/0027-times-as-epoch-ms.md): a store written by migrations 0001–0014, with RFC 3339
 * times (milliseconds, NULLs) in every time column, is migrated to the latest schema; each value becomes exactly its
 * epoch ms, NULLs stay NULL, indexes and foreign keys survive, and `down` gives the original text back. Runs on SQLite
 * and, when TEST_DATABASE_URL is set, PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { migrateToLatest, type Store } from '../../src/store/database.ts';
import { TIME_COLUMNS } from '../../src/store/migrations/0015_times_as_epoch_ms.ts';
import { testDialects } from '../support/store.ts';
import {
  definitions,
  indexNames,
  migrateTo0015,
  migrator,
  ROWS,
  rowsOf,
  storeAt0014,
  T1,
  timeColumnTypes,
  timesOf,
} from './times-migration-support.ts';

for (const dialect of testDialects()) {
  describe(`migration 0015: times as epoch ms (${dialect})`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    let indexesBefore: string[];
    let definitionsBefore: Map<string, string>;
    const db = () => store.db as unknown as Kysely<Record<string, Record<string, unknown>>>;

    before(async () => {
      ({ store, cleanup } = await storeAt0014(dialect));
      for (const [table, rows] of Object.entries(ROWS)) await db().insertInto(table).values(rows).execute();
      indexesBefore = await indexNames(store);
      definitionsBefore = await definitions(store);
      await migrateTo0015(store);
    });
    after(() => cleanup());

    it('turns every RFC 3339 time into exactly its epoch ms and keeps NULLs', async () => {
      for (const [table, rows] of Object.entries(ROWS)) {
        const expected = timesOf(table, rows).map((row) =>
          Object.fromEntries(
            Object.entries(row).map(([column, value]) => [
              column,
              value === null ? null : Date.parse(String(value)),
            ]),
          ),
        );
        assert.deepEqual(timesOf(table, await rowsOf(store.db, table)), expected, table);
      }
      // Spelled out once, so the expectation does not rest on Date.parse alone.
      const [org] = await rowsOf(store.db, 'organizations');
      assert.equal(org?.created_at, 1_768_478_520_123);
      const [k1, k2] = await rowsOf(store.db, 'api_keys');
      assert.deepEqual(
        [k1?.expires_at, k1?.revoked_at, k1?.last_used_at, k2?.expires_at],
        [2_147_483_648_000, 1_768_478_520_999, 946_684_799_001, null],
      );
    });

    it('keeps the other columns, the indexes and the foreign keys', async () => {
      const [instance] = await rowsOf(store.db, 'instances');
      assert.deepEqual(
        { id: instance?.id, org: instance?.org_id, name: instance?.name, state: instance?.desired_state },
        { id: 'i1', org: 'org', name: 'one', state: 'disconnected' },
      );
      assert.deepEqual(await indexNames(store), indexesBefore);
      const types = await timeColumnTypes(store);
      const columns = Object.entries(TIME_COLUMNS).flatMap(([table, names]) =>
        names.map((n) => `${table}.${n}`),
      );
      assert.deepEqual(
        types,
        Object.fromEntries(columns.map((column) => [column, 'bigint'])),
        'every time column is bigint',
      );
      if (dialect === 'sqlite') {
        // The rebuilt tables are the old ones but for the time columns' type: constraints, defaults, order.
        const expected = new Map(
          [...definitionsBefore].map(([table, text]) => [
            table,
            (TIME_COLUMNS[table] ?? []).reduce(
              (ddl, column) => ddl.replace(`"${column}" varchar(30)`, `"${column}" bigint`),
              text,
            ),
          ]),
        );
        assert.deepEqual(await definitions(store), expected);
      }
      await assert.rejects(
        db()
          .insertInto('instances')
          .values({ id: 'i3', org_id: 'nowhere', env: 'test', name: 'x', created_at: 1 })
          .execute(),
        'an instance of no organization is refused',
      );
      await assert.rejects(
        db()
          .insertInto('organizations')
          .values({ id: 'o2', name: 'acme', plan: 'free', created_at: 1 })
          .execute(),
        'organization names stay unique',
      );
      await assert.rejects(
        db()
          .insertInto('organizations')
          .values({ id: 'o3', name: 'b', plan: 'free', created_at: null })
          .execute(),
        'a time column that was NOT NULL stays so',
      );
    });

    it('converts any millisecond exactly (a spread of times)', async () => {
      const times = Array.from({ length: 400 }, (_, i) => 946_684_800_000 + i * 7_919_876_543 + (i % 1000));
      const rows = times.map((ms, i) => ({ instance_id: 'i2', signature: `s${i}`, expires_at: ms }));
      await db().insertInto('gateway_replay').values(rows).execute();
      const { error } = await migrator(store).migrateDown();
      if (error) throw error;
      const asText = await sql<{
        signature: string;
        expires_at: string;
      }>`select signature, expires_at from gateway_replay where instance_id = 'i2' order by signature`.execute(
        store.db,
      );
      const bySignature = new Map(asText.rows.map((row) => [row.signature, row.expires_at]));
      for (const [i, ms] of times.entries())
        assert.equal(bySignature.get(`s${i}`), new Date(ms).toISOString());
      await migrateTo0015(store);
      const back = await sql<{
        signature: string;
        expires_at: number;
      }>`select signature, expires_at from gateway_replay where instance_id = 'i2'`.execute(store.db);
      const msBySignature = new Map(back.rows.map((row) => [row.signature, Number(row.expires_at)]));
      for (const [i, ms] of times.entries()) assert.equal(msBySignature.get(`s${i}`), ms);
      await db().deleteFrom('gateway_replay').where('instance_id', '=', 'i2').execute();
    });

    it('down gives the original text back', async () => {
      const { error } = await migrator(store).migrateDown();
      if (error) throw error;
      for (const [table, rows] of Object.entries(ROWS)) {
        assert.deepEqual(timesOf(table, await rowsOf(store.db, table)), timesOf(table, rows), table);
      }
      await migrateTo0015(store);
    });

    if (dialect === 'sqlite') {
      it('leaves foreign keys enforced on the connection', async () => {
        const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
        assert.equal(pragma.rows[0]?.foreign_keys, 1);
      });
    }
  });
}

for (const dialect of testDialects()) {
  describe(`migration 0015 refuses a value that is not a time (${dialect})`, () => {
    it('fails, names the column on SQLite, and leaves the store as it was', async () => {
      const { store, cleanup } = await storeAt0014(dialect);
      try {
        const db = store.db as unknown as Kysely<Record<string, Record<string, unknown>>>;
        await db
          .insertInto('organizations')
          .values(ROWS.organizations ?? [])
          .execute();
        const [key] = ROWS.api_keys ?? [];
        await db
          .insertInto('api_keys')
          .values({ ...key, revoked_at: 'not a time' })
          .execute();
        await assert.rejects(
          migrateToLatest(store),
          dialect === 'sqlite' ? /api_keys\.revoked_at: 1 values are not times/ : /invalid input syntax/,
        );
        const [org] = await rowsOf(store.db, 'organizations');
        assert.equal(org?.created_at, T1, 'nothing converted');
        const [stored] = await rowsOf(store.db, 'api_keys');
        assert.equal(stored?.revoked_at, 'not a time');
        const applied = await migrator(store).getMigrations();
        assert.equal(applied.find((m) => m.name === '0015_times_as_epoch_ms')?.executedAt, undefined);
        if (dialect === 'sqlite') {
          const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
          assert.equal(pragma.rows[0]?.foreign_keys, 1, 'foreign keys enforced again');
        }
      } finally {
        await cleanup();
      }
    });
  });
}
