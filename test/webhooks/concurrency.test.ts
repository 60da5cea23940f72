import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { HMAC_KEY, knownReceiver, SET_UP_BODY, textMessage, webhookAppPerTest } from './support.ts';

/**
 * `WEBHOOK_CONCURRENCY` (docs/decisions/0054-delivery-concurrency.md): a process sends on at most that many lanes at
 * once; a lane over the bound waits, claimed by nobody, until a lane ends, and is then delivered without a poll.
 */
for (const dialect of testDialects()) {
  describe(`webhook lanes sending at once (${dialect})`, () => {
    /** Replies held until `release` is called. */
    let held: (() => void)[] = [];
    const holding = () =>
      startReceiver({
        respond: (request) =>
          request.body.toString() === SET_UP_BODY
            ? { status: 200, body: 'ok' }
            : new Promise((resolve) => held.push(() => resolve({ status: 200, body: 'ok' }))),
      });
    const app = webhookAppPerTest({
      dialect,
      plan: { plan: 'pro' },
      // No poll to speak of: only commits and ended lanes wake the worker.
      webhookWorker: { pollIntervalMs: 600_000 },
      env: { WEBHOOK_CONCURRENCY: '2' },
    });

    /** Another instance of the org whose webhook points at a holding receiver. */
    const withHeld = async (name: string): Promise<{ other: Instance; receiver: Receiver }> => {
      const t = app.t();
      const receiver = await holding();
      const other = await t.newInstance('test', name);
      const hmac = await t.call('POST', `/v1/session/hmac/config?from=${other.id}`, { hmacKey: HMAC_KEY });
      assert.equal(hmac.status, 200);
      const set = await t.call('POST', `/v1/webhook?from=${other.id}`, { webhookUrl: receiver.url });
      assert.equal(set.status, 200);
      await knownReceiver(t, receiver);
      return { other, receiver };
    };

    it('holds a third lane back while two are in flight, and sends it when one ends', async () => {
      const t = app.t();
      held = [];
      const b = await withHeld('b');
      const c = await withHeld('c');
      const d = await withHeld('d');
      const receivers = [b.receiver, c.receiver, d.receiver];
      try {
        // One turn, one commit: one claim over three due lanes, with two free.
        await Promise.all(
          [b, c, d].map(({ other }) => t.services.recorder.record(other.id, textMessage('x'))),
        );
        await waitUntil(() => held.length === 2);
        const rows = await t.testStore.store.db
          .selectFrom('webhook_deliveries')
          .select(['instance_id', 'locked_by'])
          .where('instance_id', 'in', [b.other.id, c.other.id, d.other.id])
          .execute();
        assert.equal(rows.length, 3);
        assert.deepEqual(
          rows.map((row) => row.locked_by !== null).sort(),
          [false, true, true],
          'two lanes claimed, the third waiting',
        );
        assert.equal(
          receivers.reduce((sum, receiver) => sum + receiver.requests.length, 0),
          2,
        );
        // One lane ends: its end wakes the worker, which claims the third.
        held.shift()?.();
        await waitUntil(() => held.length === 2);
        for (const release of held.splice(0)) release();
        for (const receiver of receivers) assert.equal((await receiver.waitForCount(1, 10_000)).length, 1);
      } finally {
        for (const release of held.splice(0)) release();
        for (const receiver of receivers) await receiver.close();
      }
    });
  });
}

/**
 * `WEBHOOK_MAX_IN_FLIGHT` (docs/decisions/0089-lane-window-default.md): the requests a process has in flight over all
 * its lanes. A lane is claimed only with a place for its first request, and a lane's window opens only as far as
 * places are free; the bound holds while the lanes' records start their next deliveries.
 */
for (const dialect of testDialects()) {
  describe(`webhook requests in flight over all lanes (${dialect})`, () => {
    /** Replies held until released, each with the sequence it answers; the most held at once. */
    let held: { sequence: number; release: () => void }[] = [];
    let most = 0;
    beforeEach(() => {
      held = [];
      most = 0;
    });
    const holding = () =>
      startReceiver({
        respond: (request) =>
          request.body.toString() === SET_UP_BODY
            ? { status: 200, body: 'ok' }
            : new Promise((resolve) => {
                const { sequence } = JSON.parse(request.body.toString()) as { sequence: number };
                held.push({ sequence, release: () => resolve({ status: 200, body: 'ok' }) });
                most = Math.max(most, held.length);
              }),
      });
    const appWith = (env: Record<string, string>) =>
      webhookAppPerTest({
        dialect,
        plan: { plan: 'pro' },
        webhookWorker: { pollIntervalMs: 600_000 },
        // Long attempts: replies are held across several waits on a slow machine.
        env: { WEBHOOK_LANE_WINDOW: '3', WEBHOOK_TIMEOUT_SECONDS: '60', ...env },
      });

    /**
     * More instances of the org named `names`, each with its webhook at a holding receiver and `count` events queued
     * (`count[i]` for the i-th when a list).
     */
    const busyLanes = async (
      t: TestApp,
      names: string[],
      count: number | readonly number[],
    ): Promise<Receiver[]> => {
      const lanes: { other: Instance; receiver: Receiver }[] = [];
      for (const name of names) {
        const receiver = await holding();
        const other = await t.newInstance('test', name);
        const set = await t.call('POST', `/v1/webhook?from=${other.id}`, { webhookUrl: receiver.url });
        assert.equal(set.status, 200);
        await knownReceiver(t, receiver);
        lanes.push({ other, receiver });
      }
      // One turn, one commit: one claim sees every backlog.
      await Promise.all(
        lanes.flatMap(({ other }, lane) =>
          Array.from({ length: typeof count === 'number' ? count : (count[lane] ?? 0) }, (_, index) =>
            t.services.recorder.record(other.id, textMessage(`m${index}`)),
          ),
        ),
      );
      return lanes.map(({ receiver }) => receiver);
    };
    /** Releases the held replies one at a time until `total` were released; returns each receiver's sequences. */
    const drain = async (receivers: Receiver[], total: number): Promise<number[][]> => {
      let released = 0;
      while (released < total) {
        await waitUntil(() => held.length > 0);
        held.shift()?.release();
        released += 1;
      }
      return receivers.map((receiver) =>
        receiver.requests.map(
          (request) => (JSON.parse(request.body.toString()) as { sequence: number }).sequence,
        ),
      );
    };

    describe('with places for two requests', () => {
      const app = appWith({ WEBHOOK_MAX_IN_FLIGHT: '2' });
      it('claims only the lanes it has a place for, opens no window, and never holds more than two', async () => {
        const t = app.t();
        const receivers = await busyLanes(t, ['b', 'c', 'd'], 3);
        try {
          await waitUntil(() => held.length === 2);
          assert.equal(t.services.webhooks.requestsInFlight, 2);
          const locked = await t.testStore.store.db
            .selectFrom('webhook_deliveries as d')
            .innerJoin('instances as i', 'i.id', 'd.instance_id')
            .select(['i.name', 'd.locked_by'])
            .where('i.name', 'in', ['b', 'c', 'd'])
            .where('d.locked_by', 'is not', null)
            .execute();
          assert.equal(
            new Set(locked.map((row) => row.name)).size,
            2,
            'two lanes claimed, the third waiting',
          );
          assert.equal(
            receivers.reduce((sum, receiver) => sum + receiver.requests.length, 0),
            2,
            'one request on each claimed lane: no place for a window',
          );
          const sequences = await drain(receivers, 9);
          for (const got of sequences) assert.deepEqual(got, [1, 2, 3], 'each lane in sequence order, once');
          assert.equal(most, 2, 'never more than two requests held at once');
          await waitUntil(() => t.services.webhooks.requestsInFlight === 0);
        } finally {
          for (const { release } of held.splice(0)) release();
          for (const receiver of receivers) await receiver.close();
        }
      });
    });

    describe('with places for five requests and four lanes', () => {
      const app = appWith({ WEBHOOK_MAX_IN_FLIGHT: '5', WEBHOOK_CONCURRENCY: '4' });
      it("keeps a place for the fourth lane while three lanes' windows open, and never holds more than five", async () => {
        const t = app.t();
        const receivers = await busyLanes(t, ['b', 'c', 'd'], 4);
        try {
          await waitUntil(() => held.length === 4);
          assert.equal(t.services.webhooks.requestsInFlight, 4);
          const metrics = (await t.app.inject({ url: '/metrics' })).body;
          assert.match(metrics, /^parley_webhook_requests_in_flight 4$/m);
          assert.match(metrics, /^parley_webhook_max_in_flight 5$/m);
          assert.match(metrics, /^parley_webhook_lanes_in_flight 3$/m);
          assert.deepEqual(
            receivers.map((receiver) => receiver.requests.length).sort(),
            [1, 1, 2],
            'three heads, one place kept for a fourth lane, and the one left opens the first window to two',
          );
          // A fourth instance's event while the three lanes are held: its lane is claimed at once, on the kept place.
          const [late] = await busyLanes(t, ['e'], 1);
          assert.ok(late);
          receivers.push(late);
          await waitUntil(() => held.length === 5);
          assert.equal(late.requests.length, 1);
          assert.equal(t.services.webhooks.requestsInFlight, 5);
          const sequences = await drain(receivers, 13);
          for (const got of sequences.slice(0, 3))
            assert.deepEqual(got, [1, 2, 3, 4], 'each lane in sequence order, once');
          assert.deepEqual(sequences[3], [1]);
          assert.equal(most, 5, 'never more than five requests held at once');
          await waitUntil(() => t.services.webhooks.requestsInFlight === 0);
        } finally {
          for (const { release } of held.splice(0)) release();
          for (const receiver of receivers) await receiver.close();
        }
      });
    });

    describe('with places for three lanes and six more for windows', () => {
      const app = appWith({ WEBHOOK_MAX_IN_FLIGHT: '9', WEBHOOK_CONCURRENCY: '3', WEBHOOK_LANE_WINDOW: '8' });
      it('gives what a small backlog cannot use to the busy lane: windows of five, two and two', async () => {
        const t = app.t();
        const receivers = await busyLanes(t, ['b', 'c', 'd'], [8, 2, 2]);
        try {
          await waitUntil(() => held.length === 9);
          assert.deepEqual(
            receivers.map((receiver) => receiver.requests.length),
            [5, 2, 2],
            'c and d can use one place each beside their heads; b takes the four left',
          );
          const sequences = await drain(receivers, 12);
          assert.deepEqual(
            sequences,
            [
              [1, 2, 3, 4, 5, 6, 7, 8],
              [1, 2],
              [1, 2],
            ],
            'each lane in sequence order, once',
          );
          assert.equal(most, 9, 'never more than nine requests held at once');
          await waitUntil(() => t.services.webhooks.requestsInFlight === 0);
        } finally {
          for (const { release } of held.splice(0)) release();
          for (const receiver of receivers) await receiver.close();
        }
      });
      it('shares the places for windows evenly among the lanes of a claim: each opens to three, not the first to seven', async () => {
        const t = app.t();
        const receivers = await busyLanes(t, ['b', 'c', 'd'], 8);
        try {
          await waitUntil(() => held.length === 9);
          assert.equal(t.services.webhooks.requestsInFlight, 9);
          assert.deepEqual(
            receivers.map((receiver) => receiver.requests.length),
            [3, 3, 3],
            'six places for windows over the three lanes of the claim: two each beside the head',
          );
          const sequences = await drain(receivers, 24);
          for (const got of sequences)
            assert.deepEqual(got, [1, 2, 3, 4, 5, 6, 7, 8], 'each lane in sequence order, once');
          assert.equal(most, 9, 'never more than nine requests held at once');
          await waitUntil(() => t.services.webhooks.requestsInFlight === 0);
        } finally {
          for (const { release } of held.splice(0)) release();
          for (const receiver of receivers) await receiver.close();
        }
      });
    });

    describe('with places for three lanes and seven more for windows', () => {
      const app = appWith({
        WEBHOOK_MAX_IN_FLIGHT: '10',
        WEBHOOK_CONCURRENCY: '3',
        WEBHOOK_LANE_WINDOW: '8',
      });
      it('splits an uneven number of places so that no window is more than one wider than another', async () => {
        const t = app.t();
        const receivers = await busyLanes(t, ['b', 'c', 'd'], 8);
        try {
          await waitUntil(() => held.length === 10);
          assert.deepEqual(
            receivers.map((receiver) => receiver.requests.length).sort(),
            [3, 3, 4],
            'seven places for windows over three lanes: three, two and two beside the heads',
          );
          const sequences = await drain(receivers, 24);
          for (const got of sequences)
            assert.deepEqual(got, [1, 2, 3, 4, 5, 6, 7, 8], 'each lane in sequence order, once');
          assert.equal(most, 10, 'never more than ten requests held at once');
          await waitUntil(() => t.services.webhooks.requestsInFlight === 0);
        } finally {
          for (const { release } of held.splice(0)) release();
          for (const receiver of receivers) await receiver.close();
        }
      });
    });
  });
}

/** Resolves once `check` holds, re-checked every 10 ms; fails after 10 s. */
async function waitUntil(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    assert.ok(Date.now() < deadline, 'condition not reached within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
