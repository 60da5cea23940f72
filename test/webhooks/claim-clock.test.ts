import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { DeliveryWorker } from '../../src/webhooks/worker.ts';
import { testDialects } from '../support/store.ts';
import { recordMessages, webhookAppPerTest } from './support.ts';

/**
 * A webhook claim is stamped and judged stale on the store's clock, shared by every node
 * (docs/decisions/0008-leases-and-fencing.md, "One clock"; docs/decisions/0005-outbox-and-delivery.md), never on a
 * node's wall clock. Judged on its own, a node whose clock ran ahead by more than the stale timeout took another
 * node's delivery still in flight (the receiver got it twice), and one whose clock ran behind never took back the
 * claim of a dead worker. PostgreSQL only: it is what several nodes share (a SQLite store is one process, whose clock
 * is the store's).
 */

/** The stale-claim timeout of these tests, ms. */
const STALE_MS = 30_000;
/** How far the other node's wall clock is off, ms: more than the stale timeout. */
const STEP_MS = 60_000;

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`webhook claims on the store's clock (${dialect})`, () => {
    const app = webhookAppPerTest({
      dialect,
      env: { WEBHOOK_RETRY_SCHEDULE: '60' },
      webhookWorker: { start: false, laneBatch: 1, staleAfterMs: STALE_MS },
    });
    const db = () => app.t().testStore.store.db;

    /**
     * The webhook worker of another node whose wall clock is `stepMs` off, built as the services build it: claims on
     * the node's store clock (synced), everything else on its wall clock.
     */
    const otherNode = async (stepMs: number) => {
      const real = Date.now;
      Date.now = () => real() + stepMs;
      let storeClock: StoreClock;
      try {
        storeClock = new StoreClock({ db: db(), logger: app.t().services.logger });
      } finally {
        Date.now = real;
      }
      await storeClock.sync();
      const { store, box, guard, logger } = app.t().services;
      return new DeliveryWorker({
        store,
        box,
        guard,
        logger,
        clock: () => Date.now() + stepMs,
        storeClock: () => storeClock.now(),
        scheduleMs: [60_000],
        timeoutMs: 10_000,
        staleAfterMs: STALE_MS,
        laneBatch: 1,
        workerId: `node-${stepMs}`,
      });
    };

    /** Node `node-a` claims the instance's first delivery now, on the store's clock (PostgreSQL's). */
    const claimByA = async () => {
      const now = app.t().clock();
      const clock = new StoreClock({ db: db(), logger: app.t().services.logger });
      await clock.sync();
      const lockedAt = clock.now();
      const [claimed] = await claimDeliveries(db(), dialect, {
        workerId: 'node-a',
        now,
        lockedAt,
        staleBefore: lockedAt - STALE_MS,
        limit: 1,
      });
      assert.ok(claimed, 'node-a claimed the delivery');
      return { claimed, lockedAt };
    };

    it('a node whose clock runs ahead takes no delivery still in flight on another node', async () => {
      await recordMessages(app.t(), 1);
      const { claimed } = await claimByA();
      const ahead = await otherNode(STEP_MS);
      assert.equal(await ahead.runOnce(), 0, 'the delivery node-a is sending was sent again');
      assert.equal(
        app.receiver().requests.filter((r) => r.body.toString().includes(claimed.eventId)).length,
        0,
      );
      const row = await db()
        .selectFrom('webhook_deliveries')
        .select(['locked_by', 'attempts'])
        .where('event_id', '=', claimed.eventId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { locked_by: 'node-a', attempts: 1 });
    });

    it('a node whose clock runs behind takes back the claim of a dead worker once stale', async () => {
      await recordMessages(app.t(), 1);
      const { claimed, lockedAt } = await claimByA();
      // node-a died: its claim was made longer ago than the stale timeout, on the store's clock. The delivery came
      // due long before, so the node behind finds it due on its own clock.
      await db()
        .updateTable('webhook_deliveries')
        .set({ locked_at: lockedAt - STALE_MS - 1_000, run_at: lockedAt - 2 * STEP_MS })
        .where('event_id', '=', claimed.eventId)
        .execute();
      const behind = await otherNode(-STEP_MS);
      assert.equal(await behind.runOnce(), 1, "the dead worker's claim was never taken back");
      const row = await db()
        .selectFrom('webhook_deliveries')
        .select(['status', 'locked_by', 'attempts'])
        .where('event_id', '=', claimed.eventId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'delivered', locked_by: null, attempts: 2 });
    });

    it("a redelivery judges a claim on the store's clock: refused while the claim is live there", async () => {
      await recordMessages(app.t(), 1);
      const { claimed } = await claimByA();
      // The business clock (a test's, or a node's wall clock) ahead by more than the stale timeout: the claim is
      // still in flight on the store's clock.
      app.t().clock.advance(STEP_MS);
      const redeliver = await app.t().call('POST', `/v1/webhook/deliveries/${claimed.eventId}/redeliver`);
      assert.deepEqual(
        [redeliver.status, redeliver.body],
        [409, { error: { code: 409, message: 'delivery is being attempted right now' } }],
      );
    });
  });
}
