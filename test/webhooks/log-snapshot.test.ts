import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as yieldToQueue } from 'node:timers/promises';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { finishAttempt } from '../../src/store/delivery-finish.ts';
import { pauseAfterRows } from '../support/query-hooks.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, deliveries, dueNow, recordMessages } from './support.ts';

/**
 * Pauses once, right after the delivery log's first query (events joined with deliveries, recognised by its
 * `d_event_id` column) returned its rows and before the attempts are read.
 */
const afterLogRows = () => pauseAfterRows((first) => 'd_event_id' in first);

for (const dialect of testDialects()) {
  describe(`delivery log consistency (${dialect})`, () => {
    it('an attempt finishing between the log reads shows wholly before or wholly after, never half of each', async () => {
      const testStore = await createTestStore(dialect);
      const raw = testStore.store.db;
      const hook = afterLogRows();
      const t = await createWebhookApp({
        dialect,
        testStore: { ...testStore, store: { ...testStore.store, db: raw.withPlugin(hook.plugin) } },
        webhookWorker: { start: false },
      });
      try {
        // Nothing is posted: the attempt is claimed and finished by hand (127.0.0.1 is allowed, port 9 unused).
        await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
        await recordMessages(t, 1);
        const start = t.clock();
        // Queued due now on the store's clock, which claims judge due times on
        // (docs/decisions/0005-outbox-and-delivery.md, "Due times").
        const queued = await raw.selectFrom('webhook_deliveries').select('run_at').executeTakeFirstOrThrow();
        const [claim] = await claimDeliveries(raw, dialect, {
          workerId: 'w1',
          now: start,
          dueAt: dueNow(t),
          staleBefore: start - 60_000,
          limit: 1,
        });
        assert.ok(claim);
        let finished: Promise<boolean> | undefined;
        hook.arm(async () => {
          finished = finishAttempt(raw, {
            eventId: claim.eventId,
            instanceId: claim.instanceId,
            attemptId: claim.attemptId,
            workerId: 'w1',
            lockedAt: claim.lockedAt,
            attempt: {
              statusCode: 500,
              durationMs: 7,
              error: 'receiver answered 500',
              responseBody: 'boom',
              responseTruncated: false,
            },
            outcome: { kind: 'retry', runAt: start + 1000 },
            now: new Date(start).toISOString(),
          });
          // PostgreSQL: the writer uses another connection and does not wait for the reader, so its commit
          // lands between the log's two reads. SQLite has one connection: let the writer queue for it; it gets
          // in between the reads unless they share one transaction.
          if (dialect === 'postgres') await finished;
          else await yieldToQueue();
        });
        const [during] = (await deliveries(t)).body.data.deliveries;
        assert.ok(finished, 'the attempt was finished while the log was being read');
        assert.equal(await finished, true);
        const view = (entry: any) => ({
          status: entry.status,
          nextAttemptAt: entry.nextAttemptAt,
          lastError: entry.lastError,
          attempts: entry.attempts.map((a: any) => [a.number, a.finishedAt !== null, a.statusCode, a.error]),
        });
        // The snapshot taken by the first read: the claim in flight, nothing finished yet.
        assert.deepEqual(view(during), {
          status: 'pending',
          nextAttemptAt: new Date(Number(queued.run_at)).toISOString(),
          lastError: null,
          attempts: [[1, false, null, null]],
        });
        const [after] = (await deliveries(t)).body.data.deliveries;
        assert.deepEqual(view(after), {
          status: 'pending',
          nextAttemptAt: new Date(start + 1000).toISOString(),
          lastError: 'receiver answered 500',
          attempts: [[1, true, 500, 'receiver answered 500']],
        });
      } finally {
        await t.close();
        await testStore.cleanup();
      }
    });
  });
}
