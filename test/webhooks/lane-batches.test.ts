import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { returnUnstarted } from '../../src/store/deliveries.ts';
import { ABANDONED, type ClaimedDelivery, claimDeliveries } from '../../src/store/delivery-claims.ts';
import { type FinishInput, finishAndStartNext } from '../../src/store/delivery-finish.ts';
import { testDialects } from '../support/store.ts';
import {
  bodies,
  deliveredRecord,
  dueNow,
  letTimePass,
  recordMessages,
  webhookAppPerTest,
} from './support.ts';

/**
 * Lane batches (docs/decisions/0048-lane-batches.md): a claim takes a lane's head and its next due rows; only the
 * head is started by the claim, each later one by the transaction that records the attempt before it, and the rest
 * of a batch is given back unstarted. Attempts are counted and logged only for requests actually started.
 */
for (const dialect of testDialects()) {
  describe(`webhook lane batches (${dialect})`, () => {
    const app = webhookAppPerTest({
      dialect,
      env: { WEBHOOK_RETRY_SCHEDULE: '1' },
      // One request at a time (`WEBHOOK_LANE_WINDOW=1`): each record starts the next; windows are in
      // test/webhooks/lane-windows.test.ts.
      webhookWorker: { start: false, laneBatch: 3, laneWindow: 1 },
    });
    // Every request place a lane took is given back, whatever ended it (docs/decisions/0089-lane-window-default.md);
    // nothing clamps the count, so a place given back twice shows too.
    afterEach(() => {
      assert.equal(app.t().services.webhooks.requestsInFlight, 0, 'every request place given back');
    });
    const db = () => app.t().testStore.store.db;
    const claim = (workerId: string, perLane: number, now = app.t().clock()) =>
      claimDeliveries(db(), dialect, {
        workerId,
        now,
        dueAt: dueNow(app.t()),
        staleBefore: app.t().services.webhooks.staleBefore(now),
        limit: 8,
        perLane,
      });
    /** Every delivery row in sequence order: [sequence, status, attempts, locked_by]. */
    const rows = async () =>
      (
        await db()
          .selectFrom('webhook_deliveries')
          .select(['sequence', 'status', 'attempts', 'locked_by'])
          .orderBy('sequence')
          .execute()
      ).map((row) => [Number(row.sequence), row.status, row.attempts, row.locked_by]);
    /** Every attempt row: [sequence of its event, number, worker, finished?, error]. */
    const attempts = async () =>
      (
        await db()
          .selectFrom('webhook_attempts as a')
          .innerJoin('webhook_deliveries as d', (join) =>
            join.onRef('d.event_id', '=', 'a.event_id').onRef('d.endpoint_id', '=', 'a.endpoint_id'),
          )
          .select(['d.sequence', 'a.number', 'a.worker', 'a.finished_at', 'a.error'])
          .orderBy('d.sequence')
          .orderBy('a.number')
          .execute()
      ).map((row) => [Number(row.sequence), row.number, row.worker, row.finished_at !== null, row.error]);
    /** A claim as [sequence, started, attempts, attempt number] per delivery. */
    const shapeOf = (claimed: readonly ClaimedDelivery[]) =>
      claimed.map((delivery) => [
        delivery.sequence,
        delivery.started,
        delivery.attempts,
        delivery.attemptNumber,
      ]);
    const delivered = (delivery: ClaimedDelivery, next?: ClaimedDelivery): FinishInput =>
      deliveredRecord(delivery, app.t().clock(), next);

    it('claims the head started and the next rows locked but not started; each record starts the next', async () => {
      await recordMessages(app.t(), 5);
      // The webhook queue holds the five messages, sequences 1 to 5.
      const batch = await claim('w1', 3);
      assert.deepEqual(shapeOf(batch), [
        [1, true, 1, 1],
        [2, false, 1, 1],
        [3, false, 1, 1],
      ]);
      assert.deepEqual(await rows(), [
        [1, 'pending', 1, 'w1'],
        [2, 'pending', 0, 'w1'],
        [3, 'pending', 0, 'w1'],
        [4, 'pending', 0, null],
        [5, 'pending', 0, null],
      ]);
      assert.deepEqual(await attempts(), [[1, 1, 'w1', false, null]], 'only the started attempt is logged');
      assert.deepEqual(await claim('w2', 3), [], 'the lane is busy: nothing for another worker');

      const [head, second, third] = batch;
      assert.ok(head && second && third);
      assert.deepEqual(await finishAndStartNext(db(), delivered(head, second), dialect), {
        applied: true,
        nextStarted: true,
      });
      assert.deepEqual((await rows()).slice(0, 3), [
        [1, 'delivered', 1, null],
        [2, 'pending', 1, 'w1'],
        [3, 'pending', 0, 'w1'],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, 'w1', true, null],
        [2, 1, 'w1', false, null],
      ]);

      // A failed attempt starts nothing: the record says so, and the rest is given back unstarted.
      const failed: FinishInput = {
        ...delivered(second, third),
        attempt: {
          statusCode: 500,
          durationMs: 2,
          error: 'receiver answered 500',
          responseBody: '',
          responseTruncated: false,
        },
        outcome: { kind: 'retry', runAt: app.t().clock() + 60_000 },
      };
      assert.deepEqual(await finishAndStartNext(db(), failed, dialect), {
        applied: true,
        nextStarted: false,
      });
      assert.equal(await returnUnstarted(db(), 'w1', [third]), 1);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, null],
        [2, 'pending', 1, null],
        [3, 'pending', 0, null],
        [4, 'pending', 0, null],
        [5, 'pending', 0, null],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, 'w1', true, null],
        [2, 1, 'w1', true, 'receiver answered 500'],
      ]);
      // The next claim starts after the failed one, whose retry is not due: 3, 4, 5.
      assert.deepEqual(
        (await claim('w2', 3)).map((delivery) => [delivery.sequence, delivery.started]),
        [
          [3, true],
          [4, false],
          [5, false],
        ],
      );
    });

    it("locks every lane's tail in one claim, each from its own head, and leaves the rows after it", async () => {
      // The default webhook's lane gets sequences 1 to 6; the endpoint, created after two, 3 to 6.
      await recordMessages(app.t(), 2);
      const endpoint = await app.t().call('POST', '/v1/webhooks', {
        url: app.receiver().url,
        events: ['Message'],
      });
      assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
      const endpointId: string = endpoint.body.data.id;
      await recordMessages(app.t(), 4);
      const batch = await claim('w1', 3);
      assert.deepEqual(
        batch.map((delivery) => delivery.sequence),
        [1, 2, 3, 3, 4, 5],
        'in sequence order',
      );
      assert.deepEqual(
        batch
          .map((delivery): [string, number, boolean] => [
            delivery.endpointId,
            delivery.sequence,
            delivery.started,
          ])
          .sort((a, b) => a[0].localeCompare(b[0]) || a[1] - b[1]),
        [
          ['', 1, true],
          ['', 2, false],
          ['', 3, false],
          [endpointId, 3, true],
          [endpointId, 4, false],
          [endpointId, 5, false],
        ],
      );
      const lanes = await db()
        .selectFrom('webhook_deliveries')
        .select(['endpoint_id', 'sequence', 'attempts', 'locked_by'])
        .orderBy('endpoint_id')
        .orderBy('sequence')
        .execute();
      assert.deepEqual(
        lanes.map((row) => [row.endpoint_id, Number(row.sequence), row.attempts, row.locked_by]),
        [
          ['', 1, 1, 'w1'],
          ['', 2, 0, 'w1'],
          ['', 3, 0, 'w1'],
          ['', 4, 0, null],
          ['', 5, 0, null],
          ['', 6, 0, null],
          [endpointId, 3, 1, 'w1'],
          [endpointId, 4, 0, 'w1'],
          [endpointId, 5, 0, 'w1'],
          [endpointId, 6, 0, null],
        ],
      );
    });

    it('a lane whose URL or HMAC key changed starts no more of the batch', async () => {
      await recordMessages(app.t(), 3);
      const [head, second, third] = await claim('w1', 3);
      assert.ok(head && second && third);
      // The HMAC key changes: the next delivery would be signed with the old one.
      const rekey = await app.t().call('POST', '/v1/session/hmac/config', {
        hmacKey: 'whsec-another-0123456789-abcdefghij',
      });
      assert.equal(rekey.status, 200);
      assert.deepEqual(await finishAndStartNext(db(), delivered(head, second), dialect), {
        applied: true,
        nextStarted: false,
      });
      assert.equal(await returnUnstarted(db(), 'w1', [second, third]), 2);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, null],
        [2, 'pending', 0, null],
        [3, 'pending', 0, null],
      ]);
      // Claimed again with the new key, then the URL changes.
      const [head2, next2] = await claim('w1', 3);
      assert.ok(head2 && next2);
      const moved = await app.t().call('POST', '/v1/webhook', { webhookUrl: `${app.receiver().url}/moved` });
      assert.equal(moved.status, 200);
      assert.deepEqual(await finishAndStartNext(db(), delivered(head2, next2), dialect), {
        applied: true,
        nextStarted: false,
      });
      assert.deepEqual(await attempts(), [
        [1, 1, 'w1', true, null],
        [2, 1, 'w1', true, null],
      ]);
    });

    it('a record tried again after its commit starts the next delivery once', async () => {
      await recordMessages(app.t(), 2);
      const [head, second] = await claim('w1', 2);
      assert.ok(head && second);
      const input = delivered(head, second);
      assert.deepEqual(await finishAndStartNext(db(), input, dialect), { applied: true, nextStarted: true });
      // The same record again, as after a commit whose answer was lost: the next delivery counts as started.
      assert.deepEqual(await finishAndStartNext(db(), input, dialect), { applied: false, nextStarted: true });
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, null],
        [2, 'pending', 1, 'w1'],
      ]);
      assert.equal((await attempts()).length, 2, 'one attempt row each');
    });

    it('a record tried again only to check the next start never starts it, and reports an earlier start', async () => {
      await recordMessages(app.t(), 4);
      const [head, second, third, fourth] = await claim('w1', 4);
      assert.ok(head && second && third && fourth);
      // Checking only, on a record whose claim is still held: nothing was started, nothing is.
      assert.deepEqual(
        await finishAndStartNext(db(), { ...delivered(head, second), nextCheckOnly: true }, dialect),
        { applied: true, nextStarted: false },
      );
      assert.deepEqual((await rows()).slice(0, 2), [
        [1, 'delivered', 1, null],
        [2, 'pending', 0, 'w1'],
      ]);
      assert.equal(await returnUnstarted(db(), 'w1', [second, third, fourth]), 3);
      // A record that started the next one, tried again only to check (the worker began stopping meanwhile).
      const claimed = await claim('w1', 3);
      const [again, next] = claimed;
      assert.ok(again && next);
      assert.deepEqual(await finishAndStartNext(db(), delivered(again, next), dialect), {
        applied: true,
        nextStarted: true,
      });
      assert.deepEqual(
        await finishAndStartNext(db(), { ...delivered(again, next), nextCheckOnly: true }, dialect),
        { applied: false, nextStarted: true },
      );
      assert.equal((await attempts()).length, 3, 'one attempt row per start');
    });

    it('a batch delivery not yet started can be redelivered; the batch then gives it back', async () => {
      await recordMessages(app.t(), 3);
      const [head, second, third] = await claim('w1', 3);
      assert.ok(head && second && third);
      const started = await app.t().call('POST', `/v1/webhook/deliveries/${head.eventId}/redeliver`);
      assert.equal(started.status, 409, 'the head is being attempted');
      const queued = await app.t().call('POST', `/v1/webhook/deliveries/${second.eventId}/redeliver`);
      assert.equal(queued.status, 200, JSON.stringify(queued.body));
      assert.deepEqual(await rows(), [
        [1, 'pending', 1, 'w1'],
        [2, 'pending', 0, null],
        [3, 'pending', 0, 'w1'],
      ]);
      assert.deepEqual(await finishAndStartNext(db(), delivered(head, second), dialect), {
        applied: true,
        nextStarted: false,
      });
    });

    it('a batch whose worker died leaves no abandoned attempt for the deliveries it never started', async () => {
      await recordMessages(app.t(), 3);
      const batch = await claim('dead', 3);
      assert.equal(batch.length, 3);
      // Long after: the claim is stale and taken over, attempt numbers continuing from what was started.
      const later = await claim('w2', 3, app.t().clock() + 10 * 60_000);
      assert.deepEqual(shapeOf(later), [
        [1, true, 2, 2],
        [2, false, 1, 1],
        [3, false, 1, 1],
      ]);
      assert.deepEqual(await attempts(), [
        [1, 1, 'dead', true, ABANDONED],
        [1, 2, 'w2', false, null],
      ]);
    });

    it('the worker sends a batch in order, gives back the rest after a failure, and logs one attempt per request', async () => {
      await recordMessages(app.t(), 6);
      let answered = 0;
      app.receiver().respondWith(() => {
        answered += 1;
        return answered === 2 ? { status: 503, body: 'busy' } : { status: 200, body: 'ok' };
      });
      // Batch of 3: 1 delivered, 2 fails (its retry not due for a second), 3 given back unstarted.
      assert.equal(await app.t().services.webhooks.runOnce(), 2);
      assert.deepEqual(await rows(), [
        [1, 'delivered', 1, null],
        [2, 'pending', 1, null],
        [3, 'pending', 0, null],
        [4, 'pending', 0, null],
        [5, 'pending', 0, null],
        [6, 'pending', 0, null],
      ]);
      // The next batch: 3, 4, 5 (2 waits for its retry).
      assert.equal(await app.t().services.webhooks.runOnce(), 3);
      await letTimePass(app.t(), 5_000);
      assert.equal(await app.t().services.webhooks.runOnce(), 2, 'the retry of 2, then 6');
      const received = bodies(app.receiver().requests).map((body) => Number(body.sequence));
      assert.deepEqual(received, [1, 2, 3, 4, 5, 2, 6]);
      assert.equal((await attempts()).length, 7, 'one attempt row per request');
      assert.ok((await rows()).every(([, status]) => status === 'delivered'));
    });
  });
}
