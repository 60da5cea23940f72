import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { type DatabaseIntrospector, type Dialect, type Kysely, sql, type TableMetadata } from 'kysely';
import { isMigrated, migrateToLatest, openStore } from '../../src/store/database.ts';
import { faultAwareDialect } from '../../src/store/fault-aware-dialect.ts';
import { createTestStore, testDialects } from '../support/store.ts';

/** A catalog error as node-postgres raises it. */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** A dialect whose introspector fails its first `failures` reads with `error`, then lists one table. */
function dialectFailing(failures: number, error: Error): { dialect: Dialect; reads: () => number } {
  let reads = 0;
  const table: TableMetadata = { name: 'kysely_migration', isView: false, columns: [], schema: 't_1' };
  const introspector: DatabaseIntrospector = {
    getSchemas: async () => [],
    getTables: async () => {
      reads += 1;
      if (reads <= failures) throw error;
      return [table];
    },
    getMetadata: async () => ({ tables: [table] }),
  };
  const dialect = { createIntrospector: () => introspector } as unknown as Dialect;
  return { dialect, reads: () => reads };
}

describe('catalog reads that meet a concurrent drop (src/store/faults.ts)', () => {
  const db = {} as Kysely<unknown>;

  it('retries a read failed by a table or column dropped meanwhile (42P01, 42703), then answers', async () => {
    for (const error of [
      pgError('42P01', 'relation "t_8324081d4896.webhook_endpoints" does not exist'),
      pgError('42703', 'column "endpoint_id" of relation "webhook_attempts" does not exist'),
    ]) {
      const { dialect, reads } = dialectFailing(2, error);
      const tables = await faultAwareDialect(dialect).createIntrospector(db).getTables();
      assert.deepEqual(
        tables.map((t) => t.name),
        ['kysely_migration'],
      );
      assert.equal(reads(), 3);
    }
  });

  it('raises any other error at once, and the race itself after five reads', async () => {
    const other = dialectFailing(1, pgError('42501', 'permission denied for schema t_1'));
    await assert.rejects(faultAwareDialect(other.dialect).createIntrospector(db).getTables(), {
      message: 'permission denied for schema t_1',
    });
    assert.equal(other.reads(), 1);
    const always = dialectFailing(10, pgError('42P01', 'relation "x" does not exist'));
    await assert.rejects(faultAwareDialect(always.dialect).createIntrospector(db).getTables(), {
      message: 'relation "x" does not exist',
    });
    assert.equal(always.reads(), 5);
  });
});

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`a store reads the catalog of its own schema only (src/store/pg-introspection.ts, ${dialect})`, () => {
    it('lists its own tables with their columns, the migrator tables only when asked', async () => {
      const own = await createTestStore(dialect);
      const other = await createTestStore(dialect);
      try {
        const { db } = own.store;
        await sql`create table counted (n serial primary key, note text not null default '')`.execute(db);
        await sql`comment on column counted.note is 'a note'`.execute(db);
        const tables = await db.introspection.getTables();
        assert.deepEqual([...new Set(tables.map((t) => t.schema))], [own.schema]);
        const names = tables.map((t) => t.name);
        assert.ok(names.includes('webhook_events') && names.includes('counted'));
        assert.ok(!names.includes('kysely_migration'));
        assert.deepEqual(
          tables.find((t) => t.name === 'counted'),
          {
            name: 'counted',
            schema: own.schema,
            isView: false,
            columns: [
              {
                name: 'n',
                dataType: 'int4',
                dataTypeSchema: 'pg_catalog',
                isNullable: false,
                hasDefaultValue: true,
                isAutoIncrementing: true,
              },
              {
                name: 'note',
                dataType: 'text',
                dataTypeSchema: 'pg_catalog',
                isNullable: false,
                hasDefaultValue: true,
                isAutoIncrementing: false,
                comment: 'a note',
              },
            ],
          },
        );
        const internal = await db.introspection.getTables({ withInternalKyselyTables: true });
        assert.deepEqual(
          internal.map((t) => t.name).filter((name) => name.startsWith('kysely_')),
          ['kysely_migration', 'kysely_migration_lock'],
        );
      } finally {
        await own.cleanup();
        await other.cleanup();
      }
    });

    it('a new schema beside migrated ones is unmigrated until migrated, then ready', async () => {
      const migrated = await createTestStore(dialect);
      const schema = `t_${randomBytes(6).toString('hex')}`;
      const fresh = await openStore(migrated.database, { schema });
      try {
        assert.deepEqual(await fresh.db.introspection.getTables({ withInternalKyselyTables: true }), []);
        assert.equal(await isMigrated(fresh), false);
        await migrateToLatest(fresh);
        assert.equal(await isMigrated(fresh), true);
        await migrateToLatest(fresh);
        assert.equal(await isMigrated(fresh), true);
      } finally {
        await fresh.destroy();
        await migrated.cleanup();
      }
    });
  });
}
