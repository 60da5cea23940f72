import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DatabaseIntrospector, Dialect, Kysely, TableMetadata } from 'kysely';
import { faultAwareDialect } from '../../src/store/faults.ts';

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
