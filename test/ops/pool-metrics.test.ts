/**
 * The PostgreSQL pool's gauges on `/metrics` (docs/decisions/0080-pool-size.md): its size, its busy and idle
 * connections and the callers waiting for one, read at each scrape; a SQLite store, which has no pool, shows none.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { activityCount } from '../support/pg-activity.ts';
import { createTestStore, testDialects } from '../support/store.ts';

/** The advisory lock the statements below wait on, held by the test's own session. */
const LOCK = 80_802;

/** The samples of `/metrics` whose name starts with `parley_db_pool_`, keyed by name and labels as printed. */
async function poolSamples(t: TestApp): Promise<Map<string, number>> {
  const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(parley_db_pool_\S+) (\S+)$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) samples.set(match[1], Number(match[2]));
  }
  return samples;
}

for (const dialect of testDialects()) {
  describe(`pool gauges on /metrics [${dialect}]`, () => {
    if (dialect === 'sqlite') {
      it('a SQLite store has no pool, and no pool gauge', async () => {
        const t = await createTestApp({ dialect });
        try {
          const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
          assert.match(text, /^parley_sessions /m, 'the scrape itself answered');
          assert.doesNotMatch(text, /parley_db_pool_/);
        } finally {
          await t.close();
        }
      });
      return;
    }

    it('show the size, the connections held and the statements waiting for one', async () => {
      const t = await createTestApp({ dialect, testStore: await createTestStore(dialect, { poolSize: 2 }) });
      const database = t.testStore.database;
      if (database.dialect !== 'postgres') throw new Error('a PostgreSQL test store was asked for');
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      try {
        assert.equal((await poolSamples(t)).get('parley_db_pool_max_connections'), 2);

        await admin.query('select pg_advisory_lock($1)', [LOCK]);
        let blocked: Promise<unknown>[];
        try {
          blocked = [1, 2, 3].map(() =>
            sql`select pg_advisory_xact_lock(${LOCK})`.execute(t.services.store.db),
          );
          await eventually('two statements waiting on the lock', async () =>
            (await activityCount(admin, "wait_event_type = 'Lock' and datname = current_database()")) >= 2
              ? true
              : undefined,
          );
          const held = await poolSamples(t);
          assert.equal(held.get('parley_db_pool_connections{state="busy"}'), 2);
          assert.equal(held.get('parley_db_pool_connections{state="idle"}'), 0);
          const waiting = held.get('parley_db_pool_waiting');
          assert.ok(
            waiting !== undefined && waiting >= 1,
            `waiting ${waiting}: the third statement at least`,
          );
        } finally {
          await admin.query('select pg_advisory_unlock($1)', [LOCK]);
        }
        await Promise.all(blocked);

        const freed = await eventually('the pool idle again', async () => {
          const samples = await poolSamples(t);
          return samples.get('parley_db_pool_connections{state="busy"}') === 0 ? samples : undefined;
        });
        assert.equal(freed.get('parley_db_pool_waiting'), 0);
        assert.equal(freed.get('parley_db_pool_connections{state="idle"}'), 2);
        assert.equal(freed.get('parley_db_pool_max_connections'), 2);
      } finally {
        await admin.end();
        await t.close();
        await t.testStore.cleanup();
      }
    });
  });
}
