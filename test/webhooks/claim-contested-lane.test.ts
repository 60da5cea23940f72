/**
 * Two claims racing for one lane on PostgreSQL (docs/decisions/0048-lane-batches.md, "A claim another claim beat to
 * its lane gives it back"): the head statement judges a lane idle on the snapshot it began with, so a claim of another
 * worker committing meanwhile can hold the lane's next rows while this claim's head is an earlier row that claim did
 * not see due (a retry come due, a redelivery). Before, both claims kept what they locked: one lane was sent by two
 * batches at once, the second's tail (the rows after the first batch) started before the first batch's own rows, out
 * of `sequence` order. Now the later claim gives that lane back whole, its head's attempt uncounted. Only PostgreSQL
 * (TEST_DATABASE_URL): SQLite runs one write transaction at a time.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import pg from 'pg';
import { claimDeliveries, claimDeliveriesIn } from '../../src/store/delivery-claims.ts';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { activityCount } from '../support/pg-activity.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, recordMessages } from './support.ts';

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`two claims racing for one lane [${dialect}]`, () => {
    let t: TestApp | undefined;
    let watcher: pg.Client | undefined;
    afterEach(async () => {
      await watcher?.end();
      await t?.close();
    });

    it('the claim whose head statement began before the other committed gives the lane back: one batch a lane', async () => {
      const app = await createWebhookApp({ dialect, webhookWorker: { start: false } });
      t = app;
      watcher = new pg.Client({ connectionString: (app.testStore.database as { url: string }).url });
      await watcher.connect();
      const waiting = watcher;
      await configureWebhook(app, 'https://127.0.0.1:9/hook');
      await recordMessages(app, 6);
      const db = app.testStore.store.db;
      const due = app.services.webhooks.dueNow();
      // Sequence 1 is a retry due in 10 s: not due for the first claim, due for the second, which judges due times
      // 20 s later (as a node claiming once that retry came due, while the first claim still commits).
      await db
        .updateTable('webhook_deliveries')
        .set({ run_at: due + 10_000 })
        .where('sequence', '=', 1)
        .execute();
      const now = app.clock();
      const claim = { now, lockedAt: due, staleBefore: due - 60_000, limit: 8, perLane: 3 };
      let racing: Promise<{ sequence: number }[]> | undefined;
      const first = await db.transaction().execute(async (trx) => {
        const claimed = await claimDeliveriesIn(trx, 'postgres', { ...claim, dueAt: due, workerId: 'first' });
        // The second claim runs while the first holds its rows uncommitted: its head statement finds the lane idle
        // and takes sequence 1, then its tail waits for the first claim's rows.
        racing = claimDeliveries(db, 'postgres', { ...claim, dueAt: due + 20_000, workerId: 'second' });
        await eventually(
          'the second claim waiting for the rows of the first',
          async () =>
            (await activityCount(waiting, "datname = current_database() and wait_event_type = 'Lock'")) > 0,
        );
        return claimed;
      });
      const second = (await racing) ?? [];
      assert.deepEqual(
        first.map((delivery) => delivery.sequence),
        [2, 3, 4],
      );
      assert.deepEqual(
        second.map((delivery) => delivery.sequence),
        [],
        'the lane stays the first claim’s alone',
      );
      const rows = (
        await db
          .selectFrom('webhook_deliveries')
          .select(['sequence', 'attempts', 'locked_by'])
          .orderBy('sequence')
          .execute()
      ).map((row) => [Number(row.sequence), row.attempts, row.locked_by]);
      assert.deepEqual(rows, [
        [1, 0, null],
        [2, 1, 'first'],
        [3, 0, 'first'],
        [4, 0, 'first'],
        [5, 0, null],
        [6, 0, null],
      ]);
      const attempts = await db.selectFrom('webhook_attempts').select('worker').execute();
      assert.deepEqual(
        attempts.map((attempt) => attempt.worker),
        ['first'],
        'only the first claim’s head is logged',
      );
    });
  });
}
