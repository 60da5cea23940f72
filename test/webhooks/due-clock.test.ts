import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { DeliveryWorker } from '../../src/webhooks/worker.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { deliveries, recordMessages, webhookAppPerTest } from './support.ts';

/**
 * A delivery's due time (`run_at`: queued, redelivered, or a retry's) is set and judged on the store's clock, the
 * one every node shares (docs/decisions/0005-outbox-and-delivery.md, "Due times";
 * docs/decisions/0008-leases-and-fencing.md, "One clock"), so a retry's backoff is honoured whichever node claims it.
 * Set and judged on each node's own wall clock, a node whose clock ran ahead of the one that set a retry sent it
 * early (the backoff cut short by the skew), one whose clock ran behind sent it late, and an event queued (or
 * redelivered) on a node running ahead waited out the skew before any node on time would send it. Two workers share
 * one store here, each built as the services build a node's worker: claims and due times on the node's own
 * `StoreClock` over the store, attempts' and the log's times on its wall clock, which is off by a minute. Both
 * stores: on SQLite the two workers are two nodes' workers of one process, whose wall clocks still differ.
 */

/** The retry delay of these tests, ms (`WEBHOOK_RETRY_SCHEDULE=1`, no jitter). */
const BACKOFF_MS = 1_000;
/** How far a node's wall clock is off, ms: far more than the backoff. */
const SKEW_MS = 60_000;
/**
 * How much sooner than the backoff the retry may arrive, ms: the store clock's estimate is whole ms, read from the
 * store (PostgreSQL) half a round trip ago, while the receiver stamps arrivals on this machine's clock.
 */
const ESTIMATE_MS = 5;

for (const dialect of testDialects()) {
  describe(`webhook due times on the store's clock (${dialect})`, () => {
    const app = webhookAppPerTest({
      dialect,
      env: { WEBHOOK_RETRY_SCHEDULE: '1' },
      webhookWorker: { start: false, laneBatch: 1 },
    });

    /**
     * The webhook worker of a node (`name`) whose wall clock is `skewMs` off this machine's, as the services build it:
     * claims and due times on its own store clock (synced with the store), everything else on its wall clock.
     */
    const node = async (name: string, skewMs: number) => {
      const { store, box, guard, logger } = app.t().services;
      const wall = () => Date.now() + skewMs;
      const storeClock = new StoreClock({ db: store.db, logger, wall });
      await storeClock.sync();
      return new DeliveryWorker({
        store,
        box,
        guard,
        logger,
        clock: wall,
        storeClock: () => storeClock.now(),
        scheduleMs: [BACKOFF_MS],
        random: () => 0,
        timeoutMs: 10_000,
        laneBatch: 1,
        workerId: name,
      });
    };

    /** The receiver's arrival times (ms, this machine's clock) of the requests so far. */
    const arrivals = () => app.receiver().requests.map((request) => request.receivedAt);

    it("a node whose clock runs ahead sends a retry no sooner than its backoff, on the store's clock", async () => {
      app.receiver().enqueue({ status: 500 });
      await recordMessages(app.t(), 1);
      const onTime = await node('node-on-time', 0);
      const ahead = await node('node-ahead', SKEW_MS);
      assert.equal(await onTime.runOnce(), 1, 'the first attempt was made');
      assert.equal(await ahead.runOnce(), 0, 'the retry was sent before its backoff ran out');
      assert.equal(arrivals().length, 1);
      await eventually('the retry sent by the node ahead', async () => (await ahead.runOnce()) === 1, 5_000);
      const [first, second] = arrivals();
      assert.ok(first !== undefined && second !== undefined, 'two attempts arrived');
      assert.ok(
        second - first >= BACKOFF_MS - ESTIMATE_MS,
        `the retry came ${second - first} ms after the failed attempt, before its ${BACKOFF_MS} ms backoff`,
      );
      const [entry] = (await deliveries(app.t())).body.data.deliveries;
      assert.deepEqual(
        [entry.status, entry.attempts.map((a: { statusCode: number }) => a.statusCode)],
        ['delivered', [500, 200]],
      );
    });

    it('a node whose clock runs behind sends a retry once its backoff ran out, not a skew later', async () => {
      app.receiver().enqueue({ status: 500 });
      await recordMessages(app.t(), 1);
      const onTime = await node('node-on-time', 0);
      const behind = await node('node-behind', -SKEW_MS);
      assert.equal(await onTime.runOnce(), 1, 'the first attempt was made');
      // Judged on its wall clock the retry would be due a minute late: it is sent as soon as the backoff ran out.
      await eventually(
        'the retry sent by the node behind',
        async () => (await behind.runOnce()) === 1,
        5_000,
      );
      const [first, second] = arrivals();
      assert.ok(first !== undefined && second !== undefined, 'two attempts arrived');
      assert.ok(second - first >= BACKOFF_MS - ESTIMATE_MS, `the retry came ${second - first} ms after`);
      const row = await app
        .t()
        .testStore.store.db.selectFrom('webhook_attempts')
        .select(['worker', 'status_code'])
        .orderBy('number')
        .execute();
      assert.deepEqual(row, [
        { worker: 'node-on-time', status_code: 500 },
        { worker: 'node-behind', status_code: 200 },
      ]);
    });

    it('an event queued on a node whose clock runs ahead is due at once for a node on time', async () => {
      // The services (the node recording the event) run a minute ahead of this machine and of the store.
      app.t().clock.set(Date.now() + SKEW_MS);
      await recordMessages(app.t(), 1);
      const onTime = await node('node-on-time', 0);
      assert.equal(await onTime.runOnce(), 1, 'the new event waited for the skew of the node that queued it');
      assert.equal(arrivals().length, 1);
    });

    it('a delivery redelivered on a node whose clock runs ahead is due at once for a node on time', async () => {
      await recordMessages(app.t(), 1);
      const onTime = await node('node-on-time', 0);
      assert.equal(await onTime.runOnce(), 1);
      const [entry] = (await deliveries(app.t())).body.data.deliveries;
      assert.equal(entry.status, 'delivered');
      app.t().clock.set(Date.now() + SKEW_MS);
      const redeliver = await app.t().call('POST', `/v1/webhook/deliveries/${entry.id}/redeliver`);
      assert.equal(redeliver.status, 200, JSON.stringify(redeliver.body));
      assert.equal(
        await onTime.runOnce(),
        1,
        'the redelivery waited for the skew of the node that queued it',
      );
      assert.equal(arrivals().length, 2);
    });
  });
}
