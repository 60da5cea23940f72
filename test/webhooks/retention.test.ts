import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LogRetention } from '../../src/webhooks/retention.ts';
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

  describe(`event log retention: EVENT_RETENTION_DAYS with WEBHOOK_RETENTION_DAYS (docs/decisions/0030-event-log.md) [${dialect}]`, () => {
    const DAY = 86_400_000;
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect,
        webhookWorker: { start: false },
        env: { WEBHOOK_RETENTION_DAYS: '3', EVENT_RETENTION_DAYS: '7' },
      });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    it('keeps every event EVENT_RETENTION_DAYS even when its delivery finished; pending ones always', async () => {
      assert.equal(t.config.events.retentionMs, 7 * DAY);
      const db = t.testStore.store.db;
      const sequences = async () =>
        (
          await db
            .selectFrom('webhook_events')
            .select('sequence')
            .where('instance_id', '=', t.instance.id)
            .orderBy('sequence')
            .execute()
        ).map((row) => Number(row.sequence));
      const deliver = (sequence: number) =>
        db
          .updateTable('webhook_deliveries')
          .set({ status: 'delivered' })
          .where('instance_id', '=', t.instance.id)
          .where('sequence', '=', sequence)
          .execute();

      // Day 0: two queued (1 will be delivered, 2 stays pending: the worker is stopped), one never queued (3).
      await configureWebhook(t, receiver.url);
      await recordMessages(t, 2, 'day0-');
      await t.call('DELETE', '/v1/webhook');
      await recordMessages(t, 1, 'day0-unsent-');
      // Day 3: one queued (4, delivered: past the delivery log's 3 days by day 8, within the event log's 7).
      t.clock.advance(3 * DAY);
      await configureWebhook(t, receiver.url, null);
      await recordMessages(t, 1, 'day3-');
      // Day 8: one recent event (5).
      t.clock.advance(5 * DAY);
      await recordMessages(t, 1, 'day8-');
      await deliver(1);
      await deliver(4);

      assert.equal(await t.services.retention.runOnce(), 2, 'the delivered and the unsent event of day 0');
      assert.deepEqual(await sequences(), [2, 4, 5]);
      const log = await t.call('GET', '/v1/events');
      assert.deepEqual(
        log.body.data.events.map((e: { sequence: number }) => e.sequence),
        [2, 4, 5],
        'the log starts at the oldest event kept',
      );
      assert.equal(log.body.data.next, 5);

      // Day 11: event 4 is 8 days old. A delivery log kept longer (30 days) still holds it: the longer one wins.
      t.clock.advance(3 * DAY);
      const longerDeliveryLog = new LogRetention({
        db,
        clock: t.clock,
        logger: t.services.logger,
        retentionMs: 30 * DAY,
        eventRetentionMs: 7 * DAY,
      });
      assert.equal(await longerDeliveryLog.runOnce(), 0);
      assert.deepEqual(await sequences(), [2, 4, 5]);
      assert.equal(await t.services.retention.runOnce(), 1, 'event 4, past both retentions');
      assert.deepEqual(await sequences(), [2, 5], 'the pending delivery of day 0 stays');
      const status = await db
        .selectFrom('webhook_deliveries')
        .select('status')
        .where('instance_id', '=', t.instance.id)
        .where('sequence', '=', 2)
        .executeTakeFirstOrThrow();
      assert.equal(status.status, 'pending');
    });
  });
}
