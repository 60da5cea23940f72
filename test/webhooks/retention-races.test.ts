import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../src/store/schema.ts';
import { pruneWebhookLog } from '../../src/store/webhook-log.ts';
import { LogRetention } from '../../src/webhooks/retention.ts';
import type { ApiResponse, TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { activityCount } from '../support/pg-activity.ts';
import { TEMPLATE_SCHEMA, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, recordMessages, watchDeletes } from './support.ts';

/**
 * The log retention job (src/webhooks/retention.ts, `pruneWebhookLog`) against an operator's redelivery of an old
 * event (docs/decisions/0005-outbox-and-delivery.md, 0030-event-log.md): an event whose delivery is pending is never
 * deleted, so a redelivery the API accepted (200) must still be queued, with its event, after the job ran.
 */

const DAY = 86_400_000;

/**
 * `db` (and the transactions it opens) whose first `deleteFrom` statement calls `hook(inTransaction)` before it is
 * carried out: the point between the prune's choice of events and their deletion.
 */
function beforeFirstDelete(
  db: Kysely<Database>,
  hook: (inTransaction: boolean) => Promise<void>,
): Kysely<Database> {
  let ran = false;
  return watchDeletes(db, {
    before: async (inTransaction) => {
      if (ran) return;
      ran = true;
      await hook(inTransaction);
    },
  });
}

/** How many statements of the test's PostgreSQL database wait for a lock. */
function lockWaits(client: pg.Client): Promise<number> {
  return activityCount(client, "datname = current_database() and wait_event_type = 'Lock'");
}

for (const dialect of testDialects()) {
  describe(`log retention racing a redelivery [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    let watcher: pg.Client | undefined;
    let eventId: string;
    before(async () => {
      receiver = await startReceiver();
    });
    after(async () => {
      await receiver?.close();
    });
    beforeEach(async () => {
      t = await createWebhookApp({
        dialect,
        webhookWorker: { start: false },
        env: { WEBHOOK_RETENTION_DAYS: '30', EVENT_RETENTION_DAYS: '7' },
      });
      if (dialect === 'postgres') {
        watcher = new pg.Client({ connectionString: (t.testStore.database as { url: string }).url });
        await watcher.connect();
        await watcher.query(`set search_path to ${TEMPLATE_SCHEMA}`);
      }
      const db = t.testStore.store.db;
      await configureWebhook(t, receiver.url);
      await recordMessages(t, 1, 'old-');
      const delivery = await db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      eventId = delivery.event_id;
      // Its delivery failed for good a month ago.
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'failed', last_error: 'receiver answered 500' })
        .where('event_id', '=', eventId)
        .execute();
      t.clock.advance(31 * DAY);
    });
    afterEach(async () => {
      await watcher?.end().catch(() => undefined);
      watcher = undefined;
      await t?.close();
    });

    const redeliver = () => t.call('POST', `/v1/webhook/deliveries/${eventId}/redeliver`);

    /** The delivery row of the event now, or undefined when the event (and so its delivery) is gone. */
    const deliveryNow = () =>
      t.testStore.store.db
        .selectFrom('webhook_deliveries')
        .select('status')
        .where('event_id', '=', eventId)
        .executeTakeFirst();

    /** A redelivery answered 200 is queued; otherwise it must have found the event gone (404). */
    const assertConsistent = async (answer: ApiResponse) => {
      assert.ok([200, 404].includes(answer.status), JSON.stringify(answer.body));
      if (answer.status === 200)
        assert.deepEqual(
          await deliveryNow(),
          { status: 'pending' },
          'the accepted redelivery is queued, with its event',
        );
      else assert.equal(await deliveryNow(), undefined);
    };

    it('a redelivery between the prune choosing the event and deleting it is kept, or answers 404', async () => {
      let redelivery: Promise<ApiResponse> | undefined;
      const racing = beforeFirstDelete(t.testStore.store.db, async (inTransaction) => {
        redelivery = redeliver();
        if (!inTransaction) {
          // Statements of their own: the operator's request can run to its end between them.
          await redelivery;
        } else if (watcher) {
          // PostgreSQL: it runs until it finishes or waits for a lock the prune holds.
          const w = watcher;
          const done = redelivery.then(() => true);
          await eventually(
            'the redelivery ends or waits for the prune',
            async () => (await Promise.race([done, Promise.resolve(false)])) || (await lockWaits(w)) > 0,
          );
        }
        // SQLite in a transaction: the prune holds the only connection; the redelivery runs after its commit.
      });
      await pruneWebhookLog(racing, new Date(t.clock() - 30 * DAY).toISOString(), 1000);
      assert.ok(redelivery, 'the prune chose the old event');
      await assertConsistent(await redelivery);
    });

    if (dialect === 'postgres')
      it('a redelivery whose transaction is open when the prune starts is kept, or answers 404', async () => {
        const w = watcher;
        assert.ok(w);
        const blocker = new pg.Client({ connectionString: (t.testStore.database as { url: string }).url });
        await blocker.connect();
        try {
          await blocker.query(`set search_path to ${TEMPLATE_SCHEMA}`);
          // Holding the delivery row stops the redelivery at its update, after it read the event.
          await blocker.query('begin');
          await blocker.query('select status from webhook_deliveries where event_id = $1 for update', [
            eventId,
          ]);
          const redelivery = redeliver();
          await eventually('the redelivery waits at its update', async () => (await lockWaits(w)) === 1);
          let pruned = false;
          const pruning = pruneWebhookLog(
            t.testStore.store.db,
            new Date(t.clock() - 30 * DAY).toISOString(),
            1000,
          ).finally(() => {
            pruned = true;
          });
          await eventually('the prune ends or waits too', async () => pruned || (await lockWaits(w)) === 2);
          await blocker.query('rollback');
          const answer = await redelivery;
          await pruning;
          await assertConsistent(answer);
        } finally {
          await blocker.query('rollback').catch(() => undefined);
          await blocker.end().catch(() => undefined);
        }
      });

    if (dialect === 'postgres')
      it('a batch whose re-check keeps a chosen event is followed by the next batch', async () => {
        const w = watcher;
        assert.ok(w);
        const db = t.testStore.store.db;
        await recordMessages(t, 2, 'more-');
        await db
          .updateTable('webhook_deliveries')
          .set({ status: 'delivered' })
          .where('instance_id', '=', t.instance.id)
          .where('event_id', '!=', eventId)
          .execute();
        t.clock.advance(31 * DAY);
        const old = (await db.selectFrom('webhook_events').select('id').execute()).map((row) => row.id);
        assert.equal(old.length, 3);
        let kept: string | undefined;
        // Between the first batch's choice of two events and their delete, one of them is queued again by another
        // connection (the prune's row locks tell which it chose: a locking read skips them).
        const racing = beforeFirstDelete(db, async () => {
          const free = await w.query(
            'select id from webhook_events where id = any($1) for update skip locked',
            [old],
          );
          const unchosen = new Set(free.rows.map((row: { id: string }) => row.id));
          kept = old.find((id) => !unchosen.has(id));
          assert.ok(kept !== undefined);
          await w.query("update webhook_deliveries set status = 'pending' where event_id = $1", [kept]);
        });
        const retention = new LogRetention({
          db: racing,
          clock: t.clock,
          logger: t.services.logger,
          retentionMs: 30 * DAY,
          eventRetentionMs: 7 * DAY,
          batch: 2,
        });
        assert.equal(await retention.runOnce(), 2, 'the chosen event not queued again, then the third');
        const left = await db.selectFrom('webhook_events').select('id').execute();
        assert.deepEqual(
          left.map((row) => row.id),
          [kept],
        );
      });
  });
}
