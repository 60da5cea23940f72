/**
 * A lane window's opening tried again through a store that failed it starts nothing more once the worker stops
 * (docs/decisions/0048-lane-batches.md: a stopping worker's lane batches start no further attempt; 0050-lane-windows.md):
 * the try again only counts what an earlier try whose answer was lost started (`startedBefore`,
 * src/store/delivery-next.ts), and the deliveries not started are given back for the next claim. Before, the try
 * again started and sent the whole window after `stop()`. The opening's statement is failed by the store's fault hook
 * until the stop is asked for. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { storeOutage, testDialects } from '../support/store.ts';
import { faultedWorkerPerTest, textMessage } from './support.ts';

/** The first statement of a window's opening: SQLite's look for an attempt row, PostgreSQL's start group. */
const OPENING = {
  sqlite: /^select "id" from "webhook_attempts" where "id" = \?/,
  postgres: /with input as \(\s*select \* from unnest\(\$3::varchar\[\], \$4::varchar\[\], \$5::bigint\[\]/,
};

for (const dialect of testDialects()) {
  describe(`a window opening tried again after the worker stopped [${dialect}]`, () => {
    const fixture = faultedWorkerPerTest();

    it('starts nothing more: only the head goes out, the rest is given back unattempted', async () => {
      let failing = true;
      let stopping: Promise<void> | undefined;
      let t: TestApp | undefined;
      const { store, app } = await fixture.start(
        dialect,
        (sql) => {
          if (!failing || !OPENING[dialect].test(sql)) return;
          // The worker is stopped while the opening waits for the store; the store answers again at once.
          failing = false;
          stopping = t?.services.webhooks.stop(20_000);
          throw storeOutage(dialect);
        },
        { WEBHOOK_LANE_WINDOW: '4' },
      );
      t = app;
      const { instance, receiver } = await fixture.lane('stopping', async () => ({
        status: 200,
        body: 'ok',
      }));
      await Promise.all(
        Array.from({ length: 6 }, (_, i) => app.services.recorder.record(instance.id, textMessage(`m${i}`))),
      );
      await eventually('the opening failed and the worker asked to stop', () => stopping !== undefined);
      await stopping;
      assert.equal(receiver.requests.length, 1, 'only the head, started by the claim, went out');
      const rows = await store.store.db
        .selectFrom('webhook_deliveries')
        .select(['sequence', 'status', 'attempts', 'locked_by'])
        .where('instance_id', '=', instance.id)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        rows.map((row) => [row.status, Number(row.attempts), row.locked_by]),
        [
          ['delivered', 1, null],
          ['pending', 0, null],
          ['pending', 0, null],
          ['pending', 0, null],
          ['pending', 0, null],
          ['pending', 0, null],
        ],
      );
    });
  });
}
