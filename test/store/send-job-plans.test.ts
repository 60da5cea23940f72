import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, type Kysely, sql } from 'kysely';
import { openStore, type Store } from '../../src/store/database.ts';
import type { Database } from '../../src/store/schema.ts';
import {
  claimNextSendJob,
  instancesWithDueJobs,
  nextPendingRunAt,
  reclaimSendingJobs,
} from '../../src/store/send-jobs.ts';
import { countNewChatsSince, oldestNewChatSince } from '../../src/store/send-pacing.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The plan of `text` with every parameter bound to `0` (a number on SQLite, a literal PostgreSQL coerces to the
 * parameter's type), as one string. On PostgreSQL the plan is the generic one, made without the values, as a named
 * prepared statement's is (docs/decisions/0055-named-statements.md), with sequential scans priced out so that a
 * usable index shows even on an empty table.
 */
async function planOf(db: Kysely<Database>, dialect: 'sqlite' | 'postgres', text: string): Promise<string> {
  if (dialect === 'sqlite') {
    const count = (text.match(/\?/g) ?? []).length;
    const plan = await db.executeQuery<{ detail: string }>(
      CompiledQuery.raw(`explain query plan ${text}`, Array(count).fill(0)),
    );
    return plan.rows.map((row) => row.detail).join('\n');
  }
  const count = new Set(text.match(/\$\d+/g) ?? []).size;
  return db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local plan_cache_mode = force_generic_plan`.execute(trx);
    await sql.raw(`prepare plan_probe as ${text}`).execute(trx);
    try {
      const values = Array(count).fill("'0'").join(', ');
      const plan = await sql
        .raw<{ 'QUERY PLAN': string }>(`explain execute plan_probe${count > 0 ? `(${values})` : ''}`)
        .execute(trx);
      return plan.rows.map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await sql`deallocate plan_probe`.execute(trx);
    }
  });
}

for (const dialect of testDialects()) {
  describe(`send jobs' statements use the live-jobs indexes (docs/decisions/0060-live-send-job-index.md) [${dialect}]`, () => {
    let testStore: TestStore;
    let traced: Store;
    const statements: string[] = [];

    before(async () => {
      testStore = await createTestStore(dialect);
      // A second handle on the same store that records the text of every statement it runs.
      const record = (text: string) => {
        statements.push(text);
      };
      traced = await openStore(
        testStore.database,
        testStore.schema === undefined ? { faults: record } : { schema: testStore.schema, faults: record },
      );
    });
    after(async () => {
      await traced.destroy();
      await testStore.cleanup();
    });

    /** Runs `call` and returns the text of the one statement on `send_jobs` it ran. */
    async function statementOf(call: () => Promise<unknown>): Promise<string> {
      statements.length = 0;
      await call();
      const mine = statements.filter((text) => text.includes('send_jobs'));
      assert.equal(mine.length, 1, mine.join('\n'));
      return mine[0] ?? '';
    }

    it('the claim, in either form, and the next due time read send_jobs_due', async () => {
      const db = traced.db;
      const texts = [
        await statementOf(() => claimNextSendJob(db, 'i-1', 'node-1', 1_000)),
        await statementOf(() => claimNextSendJob(db, 'i-1', 'node-1', 1_000, { mode: 'async' })),
        await statementOf(() => nextPendingRunAt(db, 'i-1')),
      ];
      for (const text of texts) {
        assert.match(text, /'pending'/, 'the status is written into the text');
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /send_jobs_due/, plan);
      }
    });

    it('the sweep for instances with due jobs reads send_jobs_due, not every kept job', async () => {
      const text = await statementOf(() => instancesWithDueJobs(traced.db, 1_000));
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /send_jobs_due/, plan);
    });

    it('the reclaim of unconfirmed relays reads send_jobs_due', async () => {
      const text = await statementOf(() => reclaimSendingJobs(traced.db, 'i-1', 1_000));
      assert.match(text, /'sending'/);
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.match(plan, /send_jobs_due/, plan);
    });

    it('the new-chats-per-day counts read send_jobs_new_chats', async () => {
      for (const call of [
        () => countNewChatsSince(traced.db, 'i-1', 0),
        () => oldestNewChatSince(traced.db, 'i-1', 0),
      ]) {
        const text = await statementOf(call);
        const plan = await planOf(testStore.store.db, dialect, text);
        assert.match(plan, /send_jobs_new_chats/, plan);
      }
    });

    it('a status bound as a parameter could not use the index (what the literals are for)', async () => {
      const text =
        dialect === 'sqlite'
          ? 'select min("run_at") from "send_jobs" where "instance_id" = ? and "status" = ?'
          : 'select min("run_at") from "send_jobs" where "instance_id" = $1 and "status" = $2';
      const plan = await planOf(testStore.store.db, dialect, text);
      assert.doesNotMatch(plan, /send_jobs_due/, plan);
    });
  });
}
