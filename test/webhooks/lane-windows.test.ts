import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { afterEach, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { DeliveryWorker } from '../../src/webhooks/worker.ts';
import type { TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, type ReceiverReply, startReceiver } from '../support/https-receiver.ts';
import { createTestStore, TEMPLATE_SCHEMA, type TestStore, testDialects } from '../support/store.ts';
import { bodies, configureWebhook, createWebhookApp, recordMessages, webhookAppPerTest } from './support.ts';

/**
 * Lane windows (docs/decisions/0050-lane-windows.md): a lane batch keeps up to `laneWindow` requests in flight,
 * each started (its attempt counted and logged) only once the delivery before it was started; nothing more starts
 * after a failed attempt or a refused start, and the deliveries not started are given back. The window's requests
 * go pipelined on one connection (docs/decisions/0058-pipelined-lanes.md): they arrive in `sequence` order and are
 * answered in it.
 */
/** Every delivery row of `db`'s store in sequence order: [sequence, status, attempts, locked_by]. */
async function deliveryRows(db: Kysely<Database>): Promise<unknown[][]> {
  return (
    await db
      .selectFrom('webhook_deliveries')
      .select(['sequence', 'status', 'attempts', 'locked_by'])
      .orderBy('sequence')
      .execute()
  ).map((row) => [Number(row.sequence), row.status, row.attempts, row.locked_by]);
}

for (const dialect of testDialects()) {
  describe(`webhook lane windows (${dialect})`, () => {
    const app = webhookAppPerTest({
      dialect,
      // A long attempt time-out: replies are held across several waits, which a slow machine must not turn into
      // time-outs.
      env: { WEBHOOK_RETRY_SCHEDULE: '60', WEBHOOK_TIMEOUT_SECONDS: '60' },
      webhookWorker: { start: false, laneBatch: 6, laneWindow: 3 },
    });
    // Every request place a lane took is given back, whatever ended it (docs/decisions/0089-lane-window-default.md);
    // nothing clamps the count, so a place given back twice shows too.
    afterEach(() => {
      assert.equal(app.t().services.webhooks.requestsInFlight, 0, 'every request place given back');
    });
    const db = () => app.t().testStore.store.db;
    const worker = () => app.t().services.webhooks.id;
    /** Every delivery row in sequence order: [sequence, status, attempts, locked?]. */
    const rows = async () =>
      (await deliveryRows(db())).map(([sequence, status, attempts, lockedBy]) => [
        sequence,
        status,
        attempts,
        lockedBy === worker(),
      ]);
    /** Every attempt row: [sequence of its event, number, finished?]. */
    const attempts = async () =>
      (
        await db()
          .selectFrom('webhook_attempts as a')
          .innerJoin('webhook_deliveries as d', (join) =>
            join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
          )
          .select(['d.sequence', 'a.number', 'a.finished_at'])
          .orderBy('d.sequence')
          .orderBy('a.number')
          .execute()
      ).map((row) => [Number(row.sequence), row.number, row.finished_at !== null]);
    /** Holds every reply until released; returns the release functions by sequence. */
    const holdReplies = () => {
      const held = new Map<number, (reply: ReceiverReply) => void>();
      app.receiver().respondWith(
        (request) =>
          new Promise<ReceiverReply>((resolve) => {
            held.set(Number((JSON.parse(request.body.toString()) as { sequence: number }).sequence), resolve);
          }),
      );
      return held;
    };
    const sequences = () => bodies(app.receiver().requests).map((body) => Number(body.sequence));

    it('keeps three requests of one lane in flight, counts and logs each started one, and delivers each once', async () => {
      await recordMessages(app.t(), 6);
      const held = holdReplies();
      const running = app.t().services.webhooks.runOnce();
      await app.receiver().waitForCount(3, 5_000);
      await eventually('three held replies', () => held.size === 3);
      assert.deepEqual([...held.keys()].sort(), [1, 2, 3], 'the batch opens with its first three');
      assert.deepEqual(await rows(), [
        [1, 'pending', 1, true],
        [2, 'pending', 1, true],
        [3, 'pending', 1, true],
        [4, 'pending', 0, true],
        [5, 'pending', 0, true],
        [6, 'pending', 0, true],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, false],
        [2, 1, false],
        [3, 1, false],
      ]);
      assert.equal(app.receiver().requests.length, 3, 'no fourth request while three are in flight');

      // One answer lets exactly one more start: the lane's next, 4.
      held.get(1)?.({ status: 200, body: 'ok' });
      await app.receiver().waitForCount(4, 5_000);
      await eventually('the fourth held reply', () => held.has(4));
      assert.equal(app.receiver().requests.length, 4);
      assert.deepEqual((await rows())[3], [4, 'pending', 1, true]);

      app.receiver().respondWith(() => ({ status: 200, body: 'ok' }));
      for (const [sequence, release] of held) if (sequence !== 1) release({ status: 200, body: 'ok' });
      assert.equal(await running, 6);
      assert.deepEqual(sequences(), [1, 2, 3, 4, 5, 6], 'every event received once, in sequence order');
      assert.equal(
        new Set(app.receiver().requests.map((request) => request.remotePort)).size,
        1,
        'the whole batch over one connection',
      );
      assert.ok(
        (await rows()).every(([, status, count, locked]) => status === 'delivered' && count === 1 && !locked),
      );
      assert.deepEqual(
        (await attempts()).map(([sequence, number, finished]) => [sequence, number, finished]),
        [1, 2, 3, 4, 5, 6].map((sequence) => [sequence, 1, true]),
        'one finished attempt row per request',
      );
    });

    it('starts nothing after a failed attempt; the requests in flight finish and the rest is given back', async () => {
      await recordMessages(app.t(), 6);
      const held = holdReplies();
      const running = app.t().services.webhooks.runOnce();
      await eventually('three held replies', () => held.size === 3);
      // Answers come back in request order: 1 delivered starts 4, then 2 fails.
      held.get(1)?.({ status: 200, body: 'ok' });
      await eventually('the fourth held reply', () => held.has(4));
      held.get(2)?.({ status: 503, body: 'busy' });
      await eventually('the failed attempt recorded', async () => {
        const [, second] = await rows();
        return second?.[3] === false;
      });
      held.get(3)?.({ status: 200, body: 'ok' });
      held.get(4)?.({ status: 200, body: 'ok' });
      assert.equal(await running, 4);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, false],
        [2, 'pending', 1, false],
        [3, 'delivered', 1, false],
        [4, 'delivered', 1, false],
        [5, 'pending', 0, false],
        [6, 'pending', 0, false],
      ]);
      assert.equal((await attempts()).length, 4, 'only the four requests made are logged');
      assert.deepEqual(sequences(), [1, 2, 3, 4]);
    });

    it('a 410 fails the lane but not the requests in flight: each is settled by its own answer', async () => {
      await recordMessages(app.t(), 6);
      const held = holdReplies();
      const running = app.t().services.webhooks.runOnce();
      await eventually('three held replies', () => held.size === 3);
      held.get(1)?.({ status: 200, body: 'ok' });
      await eventually('the fourth held reply', () => held.has(4));
      held.get(2)?.({ status: 410, body: 'gone' });
      await eventually('the 410 recorded', async () => (await rows())[1]?.[1] === 'failed');
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, false],
        [2, 'failed', 1, false],
        [3, 'pending', 1, true],
        [4, 'pending', 1, true],
        [5, 'failed', 0, false],
        [6, 'failed', 0, false],
      ]);
      held.get(3)?.({ status: 200, body: 'ok' });
      held.get(4)?.({ status: 200, body: 'ok' });
      assert.equal(await running, 4);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, false],
        [2, 'failed', 1, false],
        [3, 'delivered', 1, false],
        [4, 'delivered', 1, false],
        [5, 'failed', 0, false],
        [6, 'failed', 0, false],
      ]);
      const webhook = await app.t().call('GET', '/v1/webhook');
      assert.equal(webhook.status, 200);
      assert.match(JSON.stringify(webhook.body), /410/, 'the webhook is disabled, with the reason');
    });

    it('a window whose claim grew old before it opened starts nothing after the head and gives back its places', async () => {
      await recordMessages(app.t(), 6);
      const { store, box, guard, clock, storeClock, logger } = app.t().services;
      // The claim reads the store's clock first (claims and due times are on it); every later reading is 35 s on,
      // past half the 60 s stale timeout, so the window may not open; the head, already started, still has 5 s before
      // its request must end (half the stale timeout plus the 10 s time-out, docs/decisions/0058-pipelined-lanes.md).
      let readings = 0;
      const worker = new DeliveryWorker({
        store,
        box,
        guard,
        logger,
        clock,
        storeClock: () => (readings++ === 0 ? storeClock.now() : storeClock.now() + 35_000),
        scheduleMs: [60_000],
        timeoutMs: 10_000,
        staleAfterMs: 60_000,
        laneBatch: 6,
        laneWindow: 3,
        workerId: 'old-claim',
      });
      assert.equal(await worker.runOnce(), 1, 'only the head, started by the claim');
      assert.equal(worker.requestsInFlight, 0, 'the head and the two places of the window given back');
      assert.deepEqual(sequences(), [1]);
      assert.deepEqual(await deliveryRows(db()), [
        [1, 'delivered', 1, null],
        [2, 'pending', 0, null],
        [3, 'pending', 0, null],
        [4, 'pending', 0, null],
        [5, 'pending', 0, null],
        [6, 'pending', 0, null],
      ]);
      assert.deepEqual(await attempts(), [[1, 1, true]]);
    });

    it('a start refused stops every later start: no delivery starts before one given back', async () => {
      await recordMessages(app.t(), 6);
      const held = holdReplies();
      const running = app.t().services.webhooks.runOnce();
      await eventually('three held replies', () => held.size === 3);
      // Event 4, claimed but not started, is redelivered: its claim is gone, so the batch cannot start it.
      const [fourth] = await db()
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('sequence', '=', 4)
        .execute();
      assert.ok(fourth);
      const queued = await app.t().call('POST', `/v1/webhook/deliveries/${fourth.event_id}/redeliver`);
      assert.equal(queued.status, 200, JSON.stringify(queued.body));
      // All three answer at once: each slot may take the next delivery (4, 5, 6) before 4's start is refused.
      for (const release of held.values()) release({ status: 200, body: 'ok' });
      assert.equal(await running, 3);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, false],
        [2, 'delivered', 1, false],
        [3, 'delivered', 1, false],
        [4, 'pending', 0, false],
        [5, 'pending', 0, false],
        [6, 'pending', 0, false],
      ]);
      assert.equal((await attempts()).length, 3);
      // The next batch goes on from 4, in order.
      app.receiver().respondWith(() => ({ status: 200, body: 'ok' }));
      assert.equal(await app.t().services.webhooks.runOnce(), 3);
      assert.deepEqual(
        sequences()
          .slice(3)
          .sort((a, b) => a - b),
        [4, 5, 6],
      );
    });
  });

  describe(`webhook lane windows: an opening that fails at its start statement (${dialect})`, () => {
    /** The opening's start statement: on SQLite a transaction whose first statement looks for an attempt row. */
    const OPENING =
      dialect === 'sqlite'
        ? /^select "id" from "webhook_attempts" where "id" = \?$/
        : /select count\(\*\) filter \(where start\) as started from chain$/;
    let testStore: TestStore | undefined;
    let t: TestApp | undefined;
    let receiver: Receiver | undefined;
    afterEach(async () => {
      await t?.close();
      await receiver?.close();
      await testStore?.cleanup();
    });
    /**
     * Another worker takes over delivery 3 while the claim's opening is about to start it: a write on a connection
     * of its own, made synchronously from the store's fault hook (on PostgreSQL by a child process, since the
     * hook cannot wait).
     */
    const stealThird = (store: TestStore) => {
      const sql = `update webhook_deliveries set locked_by = 'thief' where sequence = 3`;
      if (store.database.dialect === 'sqlite') {
        const other = new SQLite(store.database.path);
        try {
          other.prepare(sql).run();
        } finally {
          other.close();
        }
        return;
      }
      const script = `const pg = require('pg'); const c = new pg.Client(process.env.STORE_URL);
        c.connect().then(() => c.query("set search_path to ${TEMPLATE_SCHEMA}")).then(() => c.query(${JSON.stringify(sql)}))
          .then(() => c.end(), (e) => { console.error(e); process.exit(1); });`;
      const done = spawnSync(process.execPath, ['-e', script], {
        // `pg` resolves from the project's root, wherever the test was started from.
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        env: { ...process.env, STORE_URL: store.database.url },
        encoding: 'utf8',
        timeout: 10_000,
      });
      assert.equal(done.status, 0, done.stderr);
    };
    /**
     * A webhook app (lane batch 6, window 3, replies 200) with six events recorded, whose store calls `atOpening`
     * once, before the first statement of the window's opening after `arm()`. → the app, its store, what its
     * receiver was sent and `arm`.
     */
    const setUp = async (atOpening: (store: TestStore) => void) => {
      let armed = false;
      const store = await createTestStore(dialect, {
        faults: (sql) => {
          if (!armed || !OPENING.test(sql)) return;
          armed = false;
          atOpening(store);
        },
      });
      testStore = store;
      const from = await startReceiver();
      receiver = from;
      const app = await createWebhookApp({
        dialect,
        testStore: store,
        env: { WEBHOOK_RETRY_SCHEDULE: '60', WEBHOOK_TIMEOUT_SECONDS: '60' },
        webhookWorker: { start: false, laneBatch: 6, laneWindow: 3 },
      });
      t = app;
      await configureWebhook(app, from.url);
      await recordMessages(app, 6);
      from.respondWith(() => ({ status: 200, body: 'ok' }));
      return {
        app,
        store,
        /** The sequences the receiver was sent, in arrival order. */
        received: () => bodies(from.requests).map((body) => Number(body.sequence)),
        arm: () => {
          armed = true;
        },
      };
    };
    /** Every delivery row in sequence order: [sequence, status, attempts, locked_by]; and the attempt rows' count. */
    const state = async (store: TestStore) => ({
      rows: await deliveryRows(store.store.db),
      attempts: (await store.store.db.selectFrom('webhook_attempts').select('id').execute()).length,
    });

    it('refused: sends the deliveries it started, gives back the rest and every place, and leaves the taken one alone', async () => {
      let stolen = 0;
      const { app, store, received, arm } = await setUp((at) => {
        stolen += 1;
        stealThird(at);
      });
      arm();
      // The claim takes all six and starts 1; the window opens with 2 and 3, and the start statement finds 3 taken.
      assert.equal(
        await app.services.webhooks.runOnce(),
        2,
        'the head and the one delivery the opening started',
      );
      assert.equal(stolen, 1, 'the opening met the other worker');
      assert.equal(app.services.webhooks.requestsInFlight, 0, 'every place given back');
      assert.deepEqual(received(), [1, 2]);
      assert.deepEqual(await state(store), {
        rows: [
          [1, 'delivered', 1, null],
          [2, 'delivered', 1, null],
          [3, 'pending', 0, 'thief'],
          [4, 'pending', 0, null],
          [5, 'pending', 0, null],
          [6, 'pending', 0, null],
        ],
        attempts: 2,
      });
    });

    it('failed with its outcome unknown: sends only the head, keeps the opening claimed, gives back the rest and every place', async () => {
      const { app, store, received, arm } = await setUp(() => {
        throw new Error('the opening failed: whether it committed is unknown');
      });
      arm();
      assert.equal(await app.services.webhooks.runOnce(), 1, 'only the head, started by the claim');
      assert.equal(app.services.webhooks.requestsInFlight, 0, 'every place given back');
      assert.deepEqual(received(), [1]);
      // 2 and 3 may have been started by a commit whose answer was lost: they stay claimed, for the stale timeout or
      // the node registry to settle (docs/decisions/0011-store-faults.md); 4 to 6 were never in the opening. (On
      // SQLite a statement that threw rolled its transaction back, so nothing was started; the worker cannot tell a
      // lost answer from that by the error alone and takes the cautious way on both stores.)
      const worker = app.services.webhooks.id;
      assert.deepEqual(await state(store), {
        rows: [
          [1, 'delivered', 1, null],
          [2, 'pending', 0, worker],
          [3, 'pending', 0, worker],
          [4, 'pending', 0, null],
          [5, 'pending', 0, null],
          [6, 'pending', 0, null],
        ],
        attempts: 1,
      });
    });
  });
}
