/**
 * A redelivery asked while a claim of the same delivery commits (docs/decisions/0005-outbox-and-delivery.md
 * `redeliver`, src/store/deliveries.ts `requeueDelivery`): the claim locks the delivery row and writes its open
 * attempt row in one transaction; a redelivery reaching the row meanwhile waits for it and then answers `409` (an
 * attempt is in flight), leaving the claim in place. Before, on PostgreSQL, its update waited for the row alone and
 * judged the open attempt from a snapshot taken before the claim committed: it answered 200 and unlocked the
 * delivery in flight, which the next claim sent a second time while the first request was still out. Only
 * PostgreSQL (TEST_DATABASE_URL): SQLite runs one write transaction at a time.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import pg from 'pg';
import { claimDeliveries, claimDeliveriesIn } from '../../src/store/delivery-claims.ts';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { activityCount } from '../support/pg-activity.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from './support.ts';

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`a redelivery racing a claim of its delivery [${dialect}]`, () => {
    let t: TestApp | undefined;
    let receiver: Receiver | undefined;
    let watcher: pg.Client | undefined;
    afterEach(async () => {
      await watcher?.end();
      await t?.close();
      await receiver?.close();
    });

    it('waits for the claim and answers 409: the delivery stays claimed, and no second claim takes it', async () => {
      receiver = await startReceiver();
      const app = await createWebhookApp({ dialect, webhookWorker: { start: false } });
      t = app;
      watcher = new pg.Client({ connectionString: (app.testStore.database as { url: string }).url });
      await watcher.connect();
      const waiting = watcher;
      await configureWebhook(app, receiver.url);
      await app.services.recorder.record(app.instance.id, textMessage('once'));
      const db = app.testStore.store.db;
      const { event_id: eventId } = await db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', app.instance.id)
        .executeTakeFirstOrThrow();
      const now = app.clock();
      // Due times are judged on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times").
      const claim = {
        now,
        dueAt: app.services.webhooks.dueNow(),
        staleBefore: now - 60_000,
        limit: 8,
        perLane: 1,
      };

      let redelivered: ReturnType<TestApp['call']> | undefined;
      const claimed = await db.transaction().execute(async (trx) => {
        const heads = await claimDeliveriesIn(trx, 'postgres', { ...claim, workerId: 'first' });
        // The claim holds the row and has written its open attempt row; the redelivery is asked now and waits.
        redelivered = app.call('POST', `/v1/webhook/deliveries/${eventId}/redeliver`);
        await eventually(
          'the redelivery waiting for the claim',
          async () =>
            (await activityCount(waiting, "datname = current_database() and wait_event_type = 'Lock'")) > 0,
        );
        return heads;
      });
      assert.deepEqual(
        claimed.map((head) => head.eventId),
        [eventId],
      );
      const answer = await redelivered;
      assert.equal(answer?.status, 409, JSON.stringify(answer?.body));
      assert.deepEqual(answer?.body, {
        error: { code: 409, message: 'delivery is being attempted right now' },
      });
      const row = await db
        .selectFrom('webhook_deliveries')
        .select(['status', 'locked_by', 'attempts'])
        .where('event_id', '=', eventId)
        .executeTakeFirstOrThrow();
      assert.deepEqual([row.status, row.locked_by, Number(row.attempts)], ['pending', 'first', 1]);
      const second = await claimDeliveries(db, 'postgres', { ...claim, now: now + 1, workerId: 'second' });
      assert.deepEqual(second, [], 'the delivery in flight is not claimed again');
    });
  });
}
