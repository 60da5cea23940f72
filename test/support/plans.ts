import { CompiledQuery, type Kysely, sql } from 'kysely';
import { openStore, type Store } from '../../src/store/database.ts';
import type { Database } from '../../src/store/schema.ts';
import type { TestDialect, TestStore } from './store.ts';

/**
 * The plan of `text` with every parameter bound to null, as one string: SQLite's `EXPLAIN QUERY PLAN` details, one a
 * line, or PostgreSQL's `EXPLAIN` lines. On PostgreSQL the plan is the generic one, made without the values, as a
 * named prepared statement's is (docs/decisions/0055-named-statements.md), with sequential scans priced out so that a
 * usable index shows even on a small table.
 * @throws the store's error when `text` does not parse or plan.
 */
export async function planOf(db: Kysely<Database>, dialect: TestDialect, text: string): Promise<string> {
  if (dialect === 'sqlite') {
    const count = (text.match(/\?/g) ?? []).length;
    const plan = await db.executeQuery<{ detail: string }>(
      CompiledQuery.raw(`explain query plan ${text}`, Array(count).fill(null)),
    );
    return plan.rows.map((row) => row.detail).join('\n');
  }
  const count = new Set(text.match(/\$\d+/g) ?? []).size;
  return db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local plan_cache_mode = force_generic_plan`.execute(trx);
    await sql.raw(`prepare plan_probe as ${text}`).execute(trx);
    try {
      const values = Array(count).fill('null').join(', ');
      const plan = await sql
        .raw<{ 'QUERY PLAN': string }>(`explain execute plan_probe${count > 0 ? `(${values})` : ''}`)
        .execute(trx);
      return plan.rows.map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await sql`deallocate plan_probe`.execute(trx);
    }
  });
}

/** A second handle on a test store that records the text of every statement it runs. */
export interface TracedStore {
  store: Store;
  /**
   * Runs `call` and returns the texts of the statements it ran, in order, that contain `table` (every statement
   * when omitted).
   */
  statementsOf(call: () => Promise<unknown>, table?: string): Promise<string[]>;
}

/** Opens a {@link TracedStore} on `testStore` (the caller destroys `store`). */
export async function openTracedStore(testStore: TestStore): Promise<TracedStore> {
  const statements: string[] = [];
  const record = (text: string) => {
    statements.push(text);
  };
  const store = await openStore(
    testStore.database,
    testStore.schema === undefined ? { faults: record } : { schema: testStore.schema, faults: record },
  );
  return {
    store,
    async statementsOf(call, table) {
      statements.length = 0;
      await call();
      return table === undefined ? [...statements] : statements.filter((text) => text.includes(table));
    },
  };
}
