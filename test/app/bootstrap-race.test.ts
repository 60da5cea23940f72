import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { bootstrapIfEmpty } from '../../src/app/bootstrap.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * Two nodes of a new cluster started at the same moment against one empty PostgreSQL database (docs/deploy.md: "On
 * several nodes the first node to start applies [the migrations] while the others wait for it"): each runs the
 * first-boot bootstrap once it listens (src/server.ts). Exactly one of them may create the `default` organization
 * and print the banner; the other must start as on any later boot, not fail its start.
 */
for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`first boot of two nodes at once [${dialect}]`, () => {
    let t: TestStore;
    let second: Store;
    before(async () => {
      t = await createTestStore(dialect);
      second = await openStore(t.database, t.schema === undefined ? {} : { schema: t.schema });
    });
    after(async () => {
      await second.destroy();
      await t.cleanup();
    });

    it('one node bootstraps, the other starts without failing, and the store holds one bootstrap', async () => {
      // Both nodes find the store empty before either writes: a third session holds inserts into `organizations`
      // (SHARE mode lets the reads through) until both nodes wait on it, as two starts a few ms apart do.
      const gate = new pg.Client({
        connectionString: t.database.dialect === 'postgres' ? t.database.url : '',
      });
      await gate.connect();
      let results: PromiseSettledResult<unknown>[];
      try {
        await gate.query('begin');
        await gate.query(`lock table ${t.schema ?? 'public'}.organizations in share mode`);
        const both = Promise.allSettled([bootstrapIfEmpty(t.store.db), bootstrapIfEmpty(second.db)]);
        await eventually('both nodes waiting to insert their organization', async () => {
          const { rows } = await gate.query<{ n: string }>(
            `select count(*) as n from pg_locks
              where not granted and relation = '${t.schema ?? 'public'}.organizations'::regclass`,
          );
          return Number(rows[0]?.n) === 2;
        });
        await gate.query('commit');
        results = await both;
      } finally {
        await gate.end();
      }
      const failures = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
      assert.deepEqual(failures, [], 'neither node failed its start');
      const made = results.filter((r) => r.status === 'fulfilled' && r.value !== null);
      assert.equal(made.length, 1, 'exactly one node printed a first-boot banner');
      const orgs = await t.store.db.selectFrom('organizations').select('name').execute();
      assert.deepEqual(
        orgs.map((o) => o.name),
        ['default'],
      );
      const instances = await t.store.db.selectFrom('instances').select('id').execute();
      assert.equal(instances.length, 1, 'one sandbox instance');
      const keys = await t.store.db.selectFrom('api_keys').select('id').execute();
      assert.equal(keys.length, 1, 'one bootstrap key');
    });
  });
}
