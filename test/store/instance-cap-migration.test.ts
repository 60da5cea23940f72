import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Migrator, sql } from 'kysely';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { createOrganization, getOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * Migration 0016 (docs/decisions/0029-instances-over-the-api.md): `organizations.max_instances`, nullable, added and
 * dropped on both dialects; existing organizations keep null (the plan's cap).
 */

/** The columns of `organizations`, in order. */
async function columns(t: TestStore): Promise<string[]> {
  const { store } = t;
  const { rows } =
    store.dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from pragma_table_info('organizations') order by cid`.execute(
          store.db,
        )
      : await sql<{ name: string }>`select column_name as name from information_schema.columns
          where table_schema = current_schema() and table_name = 'organizations' order by ordinal_position`.execute(
          store.db,
        );
  return rows.map((row) => row.name);
}

for (const dialect of testDialects()) {
  describe(`migration 0016: the instance cap of an organization [${dialect}]`, () => {
    let t: TestStore;
    const migrator = () =>
      new Migrator({
        db: t.store.db,
        provider: migrationProvider,
        ...(t.store.schema === undefined ? {} : { migrationTableSchema: t.store.schema }),
      });
    before(async () => {
      t = await createTestStore(dialect);
    });
    after(() => t.cleanup());

    it('adds max_instances (null for existing organizations), and down drops it', async () => {
      assert.deepEqual(await columns(t), [
        'id',
        'name',
        'plan',
        'per_minute',
        'per_day',
        'created_at',
        'max_instances',
      ]);
      const { error } = await migrator().migrateTo('0015_times_as_epoch_ms');
      if (error) throw error;
      assert.deepEqual(await columns(t), ['id', 'name', 'plan', 'per_minute', 'per_day', 'created_at']);
      await t.store.db
        .insertInto('organizations')
        .values({ id: 'o1', name: 'before', plan: 'enterprise', per_minute: 10, per_day: 100, created_at: 1 })
        .execute();
      const up = await migrator().migrateToLatest();
      if (up.error) throw up.error;
      const kept = await getOrganization(t.store.db, 'o1');
      assert.equal(kept?.maxInstances, null, 'an existing organization has no cap of its own');
      const own = await createOrganization(t.store.db, {
        name: 'own',
        plan: 'enterprise',
        perMinute: 10,
        perDay: 100,
        maxInstances: 7,
      });
      assert.equal((await getOrganization(t.store.db, own.id))?.maxInstances, 7);
    });
  });
}
