import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import pino from 'pino';
import { OutboxProjection } from '../../src/events/outbox-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { openStore } from '../../src/store/database.ts';
import { releaseClaims } from '../../src/store/deliveries.ts';
import { ABANDONED, claimDeliveries } from '../../src/store/delivery-claims.ts';
import { finishAttempt } from '../../src/store/delivery-finish.ts';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import {
  bodies,
  configureWebhook,
  createWebhookApp,
  deliveries,
  dueNow,
  letTimePass,
  recordMessages,
  textMessage,
} from './support.ts';

const silent = pino({ level: 'silent' });

/** Whether `at` (an ISO time of the log) lies between `from` and `to` (epoch ms, on the store's clock). */
const dueBetween = (at: string, from: number, to: number): boolean => {
  const ms = Date.parse(at);
  return ms >= from && ms <= to;
};

for (const dialect of testDialects()) {
  describe(`delivery queue semantics (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect,
        // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
        plan: { plan: 'pro' },
        env: { WEBHOOK_RETRY_SCHEDULE: '1' },
        // One delivery per claim: these tests step through the queue one attempt at a time (batches: lane-batches.test.ts).
        webhookWorker: { start: false, laneBatch: 1 },
      });
      await configureWebhook(t, receiver.url);
    });
    afterEach(async () => {
      await t.close();
      await receiver.close();
    });
    const db = () => t.testStore.store.db;

    it('after the last retry a delivery is failed, kept and can be redelivered', async () => {
      receiver.respondWith(() => ({ status: 500, body: 'down' }));
      await recordMessages(t, 1);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      await letTimePass(t, 1200);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      let [entry] = (await deliveries(t)).body.data.deliveries;
      assert.equal(entry.status, 'failed');
      assert.equal(entry.nextAttemptAt, null);
      assert.equal(entry.lastError, 'receiver answered 500');
      assert.deepEqual(
        entry.attempts.map((a: any) => a.number),
        [1, 2],
      );
      assert.equal(await t.services.webhooks.runOnce(), 0, 'nothing more is attempted');
      receiver.respondWith(() => ({ status: 204 }));
      const before = dueNow(t);
      const redeliver = await t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`);
      assert.equal(redeliver.status, 200);
      [entry] = (await deliveries(t, 'status=pending')).body.data.deliveries;
      // Due now on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times").
      assert.ok(dueBetween(entry.nextAttemptAt, before, dueNow(t)), `due at ${entry.nextAttemptAt}, not now`);
      assert.equal(entry.lastError, null, 'the previous round’s error is not shown on the pending row');
      assert.equal(entry.attempts.length, 2, 'the attempts are kept');
      assert.equal(await t.services.webhooks.runOnce(), 1);
      [entry] = (await deliveries(t)).body.data.deliveries;
      assert.equal(entry.status, 'delivered');
      assert.deepEqual(
        entry.attempts.map((a: any) => [a.number, a.statusCode]),
        [
          [1, 500],
          [2, 500],
          [3, 204],
        ],
      );
    });

    it('redelivery clears the previous outcome (deliveredAt, lastError) and keeps the attempts', async () => {
      await recordMessages(t, 1);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      const deliveredAt = new Date(t.clock()).toISOString();
      let [entry] = (await deliveries(t)).body.data.deliveries;
      assert.deepEqual([entry.status, entry.deliveredAt, entry.lastError], ['delivered', deliveredAt, null]);

      t.clock.advance(60_000);
      let before = 0;
      const redeliver = async () => {
        before = dueNow(t);
        const response = await t.call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`);
        assert.equal(response.status, 200, JSON.stringify(response.body));
        [entry] = (await deliveries(t)).body.data.deliveries;
      };
      await redeliver();
      const pending = (e: any) => ({
        status: e.status,
        // Due now on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times").
        dueNow: dueBetween(e.nextAttemptAt, before, dueNow(t)),
        deliveredAt: e.deliveredAt,
        lastError: e.lastError,
        attempts: e.attempts.map((a: any) => [a.number, a.statusCode]),
      });
      assert.deepEqual(pending(entry), {
        status: 'pending',
        dueNow: true,
        deliveredAt: null,
        lastError: null,
        attempts: [[1, 200]],
      });

      // The new round fails (410): the failed row does not carry the old deliveredAt either.
      receiver.enqueue({ status: 410 });
      assert.equal(await t.services.webhooks.runOnce(), 1);
      [entry] = (await deliveries(t)).body.data.deliveries;
      assert.deepEqual(
        [entry.status, entry.deliveredAt, entry.lastError],
        ['failed', null, 'receiver answered 410 Gone: webhook disabled'],
      );

      await configureWebhook(t, receiver.url);
      await redeliver();
      assert.deepEqual(pending(entry), {
        status: 'pending',
        dueNow: true,
        deliveredAt: null,
        lastError: null,
        attempts: [
          [1, 200],
          [2, 410],
        ],
      });
      assert.equal(await t.services.webhooks.runOnce(), 1);
      [entry] = (await deliveries(t)).body.data.deliveries;
      assert.deepEqual(
        [entry.status, entry.deliveredAt, entry.lastError],
        ['delivered', new Date(t.clock()).toISOString(), null],
      );
    });

    it('a failing event does not block later ones; each URL gets one delivery at a time, in sequence order', async () => {
      receiver.enqueue({ status: 500 });
      await recordMessages(t, 3);
      assert.equal(await t.services.webhooks.runOnce(), 1, 'only the head of the instance is claimed');
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.equal(await t.services.webhooks.runOnce(), 0, 'the failed event waits for its retry');
      await letTimePass(t, 1200);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      assert.deepEqual(
        bodies(receiver.requests).map((b) => b.sequence),
        [1, 2, 3, 1],
      );
      const statuses = (await deliveries(t)).body.data.deliveries.map((e: any) => [e.sequence, e.status]);
      assert.deepEqual(statuses, [
        [3, 'delivered'],
        [2, 'delivered'],
        [1, 'delivered'],
      ]);
    });

    it('takes over a stale claim of a dead worker and ignores that worker when it comes back late', async () => {
      await recordMessages(t, 2);
      const lockedAt = t.services.storeClock.now();
      const dead = await claimDeliveries(db(), dialect, {
        workerId: 'dead-worker',
        now: t.clock(),
        lockedAt,
        staleBefore: t.services.webhooks.staleBefore(lockedAt),
        limit: 10,
      });
      assert.deepEqual(
        dead.map((d) => d.sequence),
        [1],
      );
      assert.equal(await releaseClaims(db(), 'someone-else'), 0, 'only the holder can release');
      assert.equal(await t.services.webhooks.runOnce(), 0, 'a live claim blocks the instance');
      // The stale timeout passes, on the store's clock the claims are judged on
      // (docs/decisions/0008-leases-and-fencing.md, "One clock"): the dead worker's claim is as if made that long ago.
      const [claimed] = dead;
      assert.ok(claimed);
      const late = { ...claimed, lockedAt: claimed.lockedAt - (2 * 5_000 + 30_000 + 1) };
      await db()
        .updateTable('webhook_deliveries')
        .set({ locked_at: late.lockedAt })
        .where('locked_by', '=', 'dead-worker')
        .execute();
      t.clock.advance(2 * 5_000 + 30_000 + 1);
      assert.equal(await t.services.webhooks.runOnce(), 1, 'the stale claim is taken over');
      const applied = await finishAttempt(db(), {
        eventId: late.eventId,
        instanceId: late.instanceId,
        attemptId: late.attemptId,
        workerId: 'dead-worker',
        lockedAt: late.lockedAt,
        attempt: {
          statusCode: 500,
          durationMs: 1,
          error: 'late',
          responseBody: null,
          responseTruncated: false,
        },
        outcome: { kind: 'retry', runAt: t.clock() + 1000 },
        now: new Date(t.clock()).toISOString(),
      });
      assert.equal(applied, false, 'the late worker no longer holds the claim');
      const entries = (await deliveries(t)).body.data.deliveries;
      const first = entries.find((e: any) => e.sequence === 1);
      assert.equal(first.status, 'delivered');
      assert.deepEqual(
        first.attempts.map((a: any) => [a.number, a.statusCode, a.error]),
        [
          [1, null, ABANDONED],
          [2, 200, null],
        ],
        'the late record leaves the attempt the takeover marked abandoned (docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md)',
      );
      const rows = await db()
        .selectFrom('webhook_attempts')
        .select(['worker', 'error'])
        .where('event_id', '=', late.eventId)
        .orderBy('number')
        .execute();
      assert.deepEqual(
        rows.map((r) => r.worker),
        ['dead-worker', t.services.webhooks.id],
      );
      assert.equal(await t.services.webhooks.runOnce(), 1, 'the next event follows');
    });

    it('marks an attempt abandoned when its worker died before finishing', async () => {
      await recordMessages(t, 1);
      const now = t.clock();
      // Claimed a minute ago on the store's clock, which claims are judged stale on.
      const lockedAt = t.services.storeClock.now() - 60_000;
      await claimDeliveries(db(), dialect, {
        workerId: 'gone',
        now,
        dueAt: dueNow(t),
        lockedAt,
        staleBefore: lockedAt - 1,
        limit: 1,
      });
      t.clock.advance(60_000);
      assert.equal(await t.services.webhooks.runOnce(), 1);
      const [entry] = (await deliveries(t)).body.data.deliveries;
      assert.equal(entry.attempts[0].error, ABANDONED);
      assert.equal(entry.attempts[0].finishedAt, new Date(t.clock()).toISOString());
      assert.equal(entry.attempts[1].statusCode, 200);
    });

    it('shutdown releases claims still in flight after the grace period', async () => {
      receiver.respondWith(() => ({ status: 200, delayMs: 4_000 }));
      await recordMessages(t, 1);
      t.services.webhooks.start();
      await receiver.waitForCount(1, 10_000);
      await t.services.webhooks.stop(50);
      const row = await db().selectFrom('webhook_deliveries').selectAll().executeTakeFirstOrThrow();
      assert.equal(row.locked_by, null);
      assert.equal(row.status, 'pending');
      const now = t.clock();
      const next = await claimDeliveries(db(), dialect, {
        workerId: 'next-process',
        now,
        dueAt: dueNow(t),
        staleBefore: t.services.webhooks.staleBefore(now),
        limit: 1,
      });
      assert.equal(next.length, 1, 'claimable at once, without waiting for the stale timeout');
    });

    it('the event row, its sequence and its delivery roll back with the recording transaction', async () => {
      await recordMessages(t, 1);
      const failing = new EventRecorder(
        db(),
        [
          new OutboxProjection({ clock: t.clock, maxAttempts: 2, onCommitted: () => undefined }),
          {
            name: 'boom',
            apply: async () => {
              throw new Error('boom');
            },
          },
        ],
        silent,
      );
      await assert.rejects(failing.record(t.instance.id, textMessage('lost')), /boom/);
      assert.equal((await db().selectFrom('webhook_events').selectAll().execute()).length, 1);
      assert.equal((await db().selectFrom('webhook_deliveries').selectAll().execute()).length, 1);
      const state = await db().selectFrom('webhook_state').selectAll().executeTakeFirstOrThrow();
      assert.equal(Number(state.last_sequence), 1);
      await recordMessages(t, 1);
      const sequences = (await db().selectFrom('webhook_events').select('sequence').execute()).map((r) =>
        Number(r.sequence),
      );
      assert.deepEqual(sequences.sort(), [1, 2], 'no gap is left by the rolled-back event');
    });

    if (dialect === 'postgres') {
      it('two processes recording and claiming at once: unique gap-free sequences, no delivery claimed twice', async () => {
        const second = await openStore(t.testStore.database, {
          schema: t.testStore.schema ?? '',
          poolSize: 5,
        });
        try {
          const recorders = [t.testStore.store.db, second.db].map(
            (handle) =>
              new EventRecorder(
                handle,
                [new OutboxProjection({ clock: t.clock, maxAttempts: 2, onCommitted: () => undefined })],
                silent,
              ),
          );
          const others = [t.instance, await t.newInstance('test', 'b'), await t.newInstance('test', 'c')];
          for (const other of others.slice(1)) {
            const set = await t.call('POST', `/v1/webhook?from=${other.id}`, { webhookUrl: receiver.url });
            assert.equal(set.status, 200);
          }
          await Promise.all(
            recorders.flatMap((recorder) =>
              others.map(async (instance) => {
                for (let i = 0; i < 15; i++) await recorder.record(instance.id, textMessage(`c${i}`));
              }),
            ),
          );
          for (const instance of others) {
            const rows = await db()
              .selectFrom('webhook_events')
              .select('sequence')
              .where('instance_id', '=', instance.id)
              .execute();
            assert.deepEqual(
              rows.map((r) => Number(r.sequence)).sort((a, b) => a - b),
              Array.from({ length: 30 }, (_, i) => i + 1),
            );
          }
          const now = t.clock();
          const claims = await Promise.all(
            Array.from({ length: 8 }, (_, i) =>
              claimDeliveries(i % 2 === 0 ? db() : second.db, 'postgres', {
                workerId: `w${i}`,
                now,
                dueAt: dueNow(t),
                staleBefore: now - 60_000,
                limit: 5,
              }),
            ),
          );
          const claimed = claims.flat();
          assert.equal(new Set(claimed.map((c) => c.eventId)).size, claimed.length, 'no event claimed twice');
          assert.deepEqual(
            claimed.map((c) => c.sequence),
            [1, 1, 1],
            'one delivery per instance, the lowest sequence',
          );
          assert.equal(new Set(claimed.map((c) => c.instanceId)).size, 3);
        } finally {
          await second.destroy();
        }
      });
    }
  });
}
