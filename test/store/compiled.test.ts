import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  COMPILED_LIST_MAX,
  compiledListStatement,
  compiledStatement,
  compiledWithLimit,
} from '../../src/store/compiled.ts';
import { PLAN_EACH_RUN } from '../../src/store/pg-statements.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/** Statements compiled once per store and run with each call's values (src/store/compiled.ts). */
const UPSERT = compiledStatement<{ key: string; resetAt: number }, { consumed: number; reset_at: number }>(
  (db, arg) =>
    db
      .insertInto('rate_limit_windows')
      .values({ key: arg('key'), consumed: 1, reset_at: arg('resetAt') })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({ consumed: sql<number>`rate_limit_windows.consumed + 1` }),
      )
      .returning(['consumed', 'reset_at']),
);

const READ = compiledStatement<{ a: string; b: string }, { key: string; consumed: number }>((db, arg) =>
  db
    .selectFrom('rate_limit_windows')
    .select(['key', 'consumed'])
    .where('key', 'in', [arg('a'), arg('b')])
    .orderBy('key'),
);

/** The SQL texts a limit statement was compiled to, in order. */
const limitTexts: string[] = [];

const FIRST_WINDOWS = compiledWithLimit<{ prefix: string }, { key: string }>((db, arg, limit) => {
  const query = db
    .selectFrom('rate_limit_windows')
    .select('key')
    .where('key', 'like', arg('prefix'))
    .orderBy('key')
    .limit(limit);
  limitTexts.push(query.compile().sql);
  return query;
});

/** {@link READ_WINDOWS}'s lookup, planned at each run on PostgreSQL. */
const READ_WINDOWS_PLANNED = compiledListStatement<Record<never, never>, { key: string }, { key: string }>(
  { key: true },
  (db, _arg, keys) =>
    db
      .selectFrom('rate_limit_windows')
      .select('key')
      .where(
        'key',
        'in',
        keys.map((k) => k.key),
      )
      .orderBy('key'),
  { planEachRun: true },
);

/** Builder calls of the list statements below, by list length (a compiled length is built once per store). */
const built = new Map<number, number>();

const INSERT_WINDOWS = compiledListStatement<
  { consumed: number },
  { key: string; resetAt: number },
  { key: string }
>({ key: true, resetAt: true }, (db, arg, rows) => {
  built.set(rows.length, (built.get(rows.length) ?? 0) + 1);
  return db
    .insertInto('rate_limit_windows')
    .values(rows.map((row) => ({ key: row.key, consumed: arg('consumed'), reset_at: row.resetAt })))
    .returning('key');
});

const READ_WINDOWS = compiledListStatement<
  { least: number },
  { key: string },
  { key: string; consumed: number; reset_at: number }
>({ key: true }, (db, arg, keys) =>
  db
    .selectFrom('rate_limit_windows')
    .select(['key', 'consumed', 'reset_at'])
    .where(
      'key',
      'in',
      keys.map((k) => k.key),
    )
    .where('consumed', '>=', arg('least'))
    .orderBy('key'),
);

for (const dialect of testDialects()) {
  describe(`compiled statements [${dialect}]`, () => {
    let store: TestStore;
    before(async () => {
      store = await createTestStore(dialect);
    });
    after(() => store.cleanup());

    it('binds each call’s values where the stand-ins were, and keeps the builder’s constants', async () => {
      const db = store.store.db;
      assert.deepEqual((await UPSERT.run(db, { key: 'k-1', resetAt: 1000 })).rows, [
        { consumed: 1, reset_at: 1000 },
      ]);
      assert.deepEqual((await UPSERT.run(db, { key: 'k-1', resetAt: 2000 })).rows, [
        { consumed: 2, reset_at: 1000 },
      ]);
      assert.deepEqual((await UPSERT.run(db, { key: 'k-2', resetAt: 3000 })).rows, [
        { consumed: 1, reset_at: 3000 },
      ]);
      assert.deepEqual((await READ.run(db, { a: 'k-2', b: 'k-1' })).rows, [
        { key: 'k-1', consumed: 2 },
        { key: 'k-2', consumed: 1 },
      ]);
    });

    it('writes a LIMIT into the SQL, compiled once per value; refuses a limit that is not a whole number', async () => {
      const db = store.store.db;
      for (const key of ['lim-a', 'lim-b', 'lim-c']) await UPSERT.run(db, { key, resetAt: 1 });
      limitTexts.length = 0;
      const keys = async (limit: number) =>
        (await FIRST_WINDOWS.run(db, { prefix: 'lim-%' }, limit)).rows.map((row) => row.key);
      assert.deepEqual(await keys(2), ['lim-a', 'lim-b']);
      assert.deepEqual(await keys(2), ['lim-a', 'lim-b']);
      assert.deepEqual(await keys(0), []);
      assert.deepEqual(await keys(10), ['lim-a', 'lim-b', 'lim-c']);
      assert.equal(limitTexts.length, 3, 'one compiled form per limit value');
      assert.deepEqual(
        limitTexts.map((text) => text.match(/limit (\S+)$/)?.[1]),
        ['2', '0', '10'],
      );
      for (const bad of [-1, 1.5, Number.NaN, 2 ** 60]) {
        await assert.rejects(FIRST_WINDOWS.run(db, { prefix: 'lim-%' }, bad), RangeError, String(bad));
      }
    });

    it('runs inside a transaction of the store, which sees its own writes and rolls them back', async () => {
      const db = store.store.db;
      await assert.rejects(
        db.transaction().execute(async (trx) => {
          assert.deepEqual((await UPSERT.run(trx, { key: 'k-3', resetAt: 5 })).rows, [
            { consumed: 1, reset_at: 5 },
          ]);
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.deepEqual((await READ.run(db, { a: 'k-3', b: 'none' })).rows, []);
    });

    it('refuses a builder that writes a stand-in into the SQL text', async () => {
      const bad = compiledStatement<{ table: string }>((db, arg) =>
        db.selectFrom(sql.raw(arg('table')).as('t')).selectAll(),
      );
      await assert.rejects(bad.run(store.store.db, { table: 'instances' }), /an argument became SQL text/);
    });

    it('compiles a list statement once per list length and binds every item’s fields and the arguments', async () => {
      const db = store.store.db;
      built.clear();
      const rows = (prefix: string, n: number) =>
        Array.from({ length: n }, (_, i) => ({ key: `${prefix}-${i}`, resetAt: 100 + i }));
      assert.deepEqual((await INSERT_WINDOWS.run(db, { consumed: 7 }, rows('one', 1))).rows, [
        { key: 'one-0' },
      ]);
      await INSERT_WINDOWS.run(db, { consumed: 8 }, rows('three-a', 3));
      await INSERT_WINDOWS.run(db, { consumed: 9 }, rows('three-b', 3));
      assert.deepEqual(
        [...built],
        [
          [1, 1],
          [3, 1],
        ],
      );
      const read = await READ_WINDOWS.run(db, { least: 8 }, [
        { key: 'three-b-2' },
        { key: 'one-0' },
        { key: 'three-a-0' },
        { key: 'absent' },
      ]);
      assert.deepEqual(read.rows, [
        { key: 'three-a-0', consumed: 8, reset_at: 100 },
        { key: 'three-b-2', consumed: 9, reset_at: 102 },
      ]);
    });

    it('builds a list longer than the compiled maximum at each call, with the same result', async () => {
      const db = store.store.db;
      built.clear();
      const long = COMPILED_LIST_MAX + 6;
      const rows = (prefix: string) =>
        Array.from({ length: long }, (_, i) => ({ key: `${prefix}-${i}`, resetAt: i }));
      await INSERT_WINDOWS.run(db, { consumed: 1 }, rows('long-a'));
      const second = await INSERT_WINDOWS.run(db, { consumed: 2 }, rows('long-b'));
      assert.equal(built.get(long), 2);
      assert.equal(second.rows.length, long);
      const read = await READ_WINDOWS.run(
        db,
        { least: 2 },
        Array.from({ length: long }, (_, i) => ({ key: `long-${i % 2 === 0 ? 'a' : 'b'}-${i}` })),
      );
      assert.equal(read.rows.length, long / 2);
      assert.ok(read.rows.every((row) => row.key.startsWith('long-b-') && row.consumed === 2));
    });

    it('marks a list statement to be planned at each run on PostgreSQL only, at any length', async () => {
      const db = store.store.db;
      await INSERT_WINDOWS.run(db, { consumed: 1 }, [{ key: 'planned-0', resetAt: 1 }]);
      const mark = dialect === 'postgres' ? `${PLAN_EACH_RUN} ` : '';
      for (const length of [2, COMPILED_LIST_MAX + 1]) {
        const keys = Array.from({ length }, (_, i) => ({ key: `planned-${i}` }));
        const query = READ_WINDOWS_PLANNED.query(db, {}, keys);
        assert.ok(query.sql.startsWith(`${mark}select "key" from "rate_limit_windows"`), query.sql);
        assert.equal(query.parameters.length, length);
        assert.deepEqual((await READ_WINDOWS_PLANNED.run(db, {}, keys)).rows, [{ key: 'planned-0' }]);
      }
    });

    it('refuses an empty list and an item without one of its fields, writing nothing', async () => {
      const db = store.store.db;
      await assert.rejects(INSERT_WINDOWS.run(db, { consumed: 1 }, []), /at least one item/);
      const lacking = [{ key: 'lacking' } as { key: string; resetAt: number }];
      await assert.rejects(INSERT_WINDOWS.run(db, { consumed: 1 }, lacking), /item 0 has no resetAt/);
      assert.deepEqual((await READ_WINDOWS.run(db, { least: 0 }, [{ key: 'lacking' }])).rows, []);
      const long = Array.from({ length: COMPILED_LIST_MAX + 1 }, (_, i) => ({
        key: `long-lacking-${i}`,
        resetAt: i,
      }));
      const lackingLast = [
        ...long.slice(0, -1),
        { key: 'long-lacking-last' } as { key: string; resetAt: number },
      ];
      await assert.rejects(
        INSERT_WINDOWS.run(db, { consumed: 1 }, lackingLast),
        new RegExp(`item ${COMPILED_LIST_MAX} has no resetAt`),
      );
      assert.deepEqual((await READ_WINDOWS.run(db, { least: 0 }, [{ key: 'long-lacking-0' }])).rows, []);
    });
  });
}
