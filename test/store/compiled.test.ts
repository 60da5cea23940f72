import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { compiledStatement } from '../../src/store/compiled.ts';
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
  });
}
