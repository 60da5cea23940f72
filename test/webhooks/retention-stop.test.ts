import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { LogRetention } from '../../src/webhooks/retention.ts';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp, recordMessages, watchDeletes } from './support.ts';

/**
 * Stopping the log retention job while it works through a backlog (docs/decisions/0023-operations.md: a graceful
 * stop fits `SHUTDOWN_TIMEOUT_SECONDS`, each phase with a share of it, so the engines and the store always get
 * closed). `services.close()` waits for `retention.stop()`; a stop must end the run after the batch in progress, not
 * after the whole backlog, whose size has no bound (a first run after an upgrade, a shortened retention).
 */

const DAY = 86_400_000;

/** `db` whose every `deleteFrom` statement calls `hook` once it was carried out. */
function afterEachDelete(db: Kysely<Database>, hook: () => void): Kysely<Database> {
  return watchDeletes(db, { after: hook });
}

for (const dialect of testDialects()) {
  describe(`stopping the log retention job mid-backlog [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createWebhookApp({ dialect, webhookWorker: { start: false } });
    });
    after(async () => {
      await t?.close();
    });

    it('stop() ends the run after the batch in progress', async () => {
      const db = t.testStore.store.db;
      await recordMessages(t, 3, 'old-'); // no URL: never queued, prunable once old
      t.clock.advance(31 * DAY);
      let stopping: Promise<void> | undefined;
      const job = new LogRetention({
        db: afterEachDelete(db, () => {
          // SIGTERM arrives while the first batch is being deleted.
          stopping ??= job.stop();
        }),
        clock: t.clock,
        logger: t.services.logger,
        retentionMs: 30 * DAY,
        batch: 1,
        intervalMs: 3_600_000,
      });
      job.start(); // the first run starts at once
      await eventually('the first batch deleted and the job told to stop', () => stopping !== undefined);
      await stopping; // resolves once the run in progress ended
      const left = await db
        .selectFrom('webhook_events')
        .select('sequence')
        .where('instance_id', '=', t.instance.id)
        .execute();
      assert.equal(left.length, 2, 'the run ended after its first batch; the next run goes on with the rest');
    });

    it('I/O that is due while a run works through a backlog is served between its batches', async () => {
      const db = t.testStore.store.db;
      await recordMessages(t, 3, 'older-');
      t.clock.advance(31 * DAY);
      const job = new LogRetention({
        db,
        clock: t.clock,
        logger: t.services.logger,
        retentionMs: 30 * DAY,
        batch: 1,
      });
      let runEnded = false;
      // Stands for a request that arrived when the run started: its socket's callback is due at the next turn.
      const io = new Promise<boolean>((resolve) => setImmediate(() => resolve(runEnded)));
      await job.runOnce().then(() => {
        runEnded = true;
      });
      assert.equal(await io, false, 'served before the run ended, not after the whole backlog');
    });
  });
}
