import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, recordMessages } from './support.ts';

for (const dialect of testDialects()) {
  describe(`delivery log retention (WEBHOOK_RETENTION_DAYS) [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect,
        webhookWorker: { start: false },
        env: { WEBHOOK_RETENTION_DAYS: '30' },
      });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    it('prunes finished events older than the retention with their attempts; pending and recent ones stay', async () => {
      const db = t.testStore.store.db;
      await configureWebhook(t, receiver.url);
      await recordMessages(t, 2, 'queued'); // pending: the worker is stopped
      const [delivered, stillPending] = await db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence')
        .execute();
      assert.ok(delivered && stillPending);
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'delivered' })
        .where('event_id', '=', delivered.event_id)
        .execute();
      await db
        .insertInto('webhook_attempts')
        .values({
          id: 'attempt-of-old-event',
          event_id: delivered.event_id,
          number: 1,
          url: receiver.url,
          worker: 'test',
          attempted_at: t.clock(),
          finished_at: t.clock(),
          status_code: 200,
          duration_ms: 3,
          error: null,
          response_body: 'ok',
          response_truncated: 0,
        })
        .execute();
      await t.call('DELETE', '/v1/webhook');
      await recordMessages(t, 2, 'unsent'); // never queued: no URL
      t.clock.advance(31 * 86_400_000);
      await recordMessages(t, 1, 'recent');

      assert.equal(await t.services.retention.runOnce(), 3, 'the delivered and the two unsent old events');
      const left = await db
        .selectFrom('webhook_events')
        .select(['id', 'sequence'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        left.map((row) => Number(row.sequence)),
        [2, 5],
        'the old pending event and the recent one',
      );
      assert.equal(left[0]?.id, stillPending.event_id);
      const attempts = await db
        .selectFrom('webhook_attempts')
        .select('id')
        .where('id', '=', 'attempt-of-old-event')
        .execute();
      assert.deepEqual(attempts, [], 'attempts go with their event');
      assert.equal(await t.services.retention.runOnce(), 0, 'nothing more to prune');
    });
  });
}
