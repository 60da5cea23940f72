import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import {
  createWebhookApp,
  dueNow,
  HMAC_KEY,
  letTimePass,
  textMessage,
  webhookAppPerTest,
} from './support.ts';

/**
 * Targeted claims (docs/decisions/0053-targeted-claims.md): a claim may look at the lanes of a few named instances
 * only, by the same rules as one over every instance; the worker claims that way after wakes that name instances,
 * and over every instance at its poll, after a wake that names none, and after a claim that filled every free lane.
 */
for (const dialect of testDialects()) {
  describe(`targeted webhook claims (${dialect})`, () => {
    const app = webhookAppPerTest({
      dialect,
      plan: { plan: 'pro' },
      // No poll to speak of: only wakes drive the worker.
      webhookWorker: { pollIntervalMs: 600_000, concurrency: 2, laneBatch: 1 },
      env: { WEBHOOK_RETRY_SCHEDULE: '1' },
    });
    const db = () => app.t().testStore.store.db;
    /** Another instance of the org with its own webhook and receiver. */
    const withOther = async (name = 'other'): Promise<{ other: Instance; receiver: Receiver }> => {
      const receiver = await startReceiver();
      const other = await app.t().newInstance('test', name);
      const t = app.t();
      assert.equal(
        (await t.call('POST', `/v1/session/hmac/config?from=${other.id}`, { hmacKey: HMAC_KEY })).status,
        200,
      );
      assert.equal(
        (await t.call('POST', `/v1/webhook?from=${other.id}`, { webhookUrl: receiver.url })).status,
        200,
      );
      return { other, receiver };
    };
    /** Each delivery row as [instance, endpoint, status, locked_by], by instance then sequence. */
    const rows = async () =>
      (
        await db()
          .selectFrom('webhook_deliveries')
          .select(['instance_id', 'endpoint_id', 'status', 'locked_by', 'sequence'])
          .orderBy('instance_id')
          .orderBy('sequence')
          .orderBy('endpoint_id')
          .execute()
      ).map((row) => [
        row.instance_id === app.t().instance.id ? 'main' : 'other',
        row.endpoint_id === '' ? '' : 'endpoint',
        row.status,
        row.locked_by,
      ]);

    it('a claim over named instances takes their lanes only, default webhook and endpoints alike', async () => {
      const t = app.t();
      await t.services.webhooks.stop();
      const { other, receiver: otherReceiver } = await withOther();
      const endpoint = await t.call('POST', `/v1/webhooks?from=${t.instance.id}`, {
        url: app.receiver().url,
        events: ['Message'],
      });
      assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
      await t.services.recorder.record(t.instance.id, textMessage('main'));
      await t.services.recorder.record(other.id, textMessage('other'));
      const now = t.clock();
      const claim = (workerId: string, instances?: string[]) =>
        claimDeliveries(db(), dialect, {
          workerId,
          now,
          dueAt: dueNow(t),
          staleBefore: now - 60_000,
          limit: 8,
          ...(instances === undefined ? {} : { instances }),
        });

      assert.deepEqual(await claim('nobody', []), [], 'no instance named: nothing claimed');
      const mine = await claim('w1', [t.instance.id, 'an-instance-that-does-not-exist']);
      assert.deepEqual(mine.map((delivery) => [delivery.instanceId, delivery.endpointId]).sort(), [
        [t.instance.id, ''],
        [t.instance.id, endpoint.body.data.id],
      ]);
      const byRows = await rows();
      assert.deepEqual(
        byRows.filter(([instance]) => instance === 'main').map((row) => row.slice(1)),
        [
          ['', 'pending', 'w1'],
          ['endpoint', 'pending', 'w1'],
        ],
      );
      assert.deepEqual(
        byRows.filter(([instance]) => instance === 'other'),
        [['other', '', 'pending', null]],
        "the other instance's delivery is left alone",
      );
      assert.deepEqual(await claim('w2', [t.instance.id]), [], 'the named lanes are busy: nothing more');
      const rest = await claim('w3');
      assert.deepEqual(
        rest.map((delivery) => delivery.instanceId),
        [other.id],
        'a claim over every instance takes the rest',
      );
      await otherReceiver.close();
    });

    it('a wake naming an instance claims from it only; a retry come due waits for a wake naming none', async () => {
      const t = app.t();
      const { other, receiver } = await withOther();
      try {
        receiver.enqueue({ status: 500, body: 'not now' });
        await t.services.recorder.record(other.id, textMessage('retried'));
        await receiver.waitForCount(1, 10_000);
        await waitUntil(async () => (await rows()).some((row) => row[0] === 'other' && row[3] === null));
        // The retry is due one second later (WEBHOOK_RETRY_SCHEDULE); nothing wakes the worker for it.
        await letTimePass(t, 5_000);

        await t.services.recorder.record(t.instance.id, textMessage('main'));
        await app.receiver().waitForCount(1, 10_000);
        await waitUntil(async () =>
          (await rows()).every((row) => row[0] !== 'main' || row[2] === 'delivered'),
        );
        assert.equal(
          receiver.requests.length,
          1,
          "the other instance's retry was not claimed by a targeted claim",
        );

        t.services.webhooks.wake();
        const received = await receiver.waitForCount(2, 10_000);
        assert.equal(textOf(received[1]), 'retried');
      } finally {
        await receiver.close();
      }
    });

    it('a due retry is claimed within a poll interval while wakes never let the worker sleep', async () => {
      const t = app.t();
      const { other, receiver } = await withOther();
      const busy = await createWebhookApp({
        dialect,
        plan: { plan: 'pro' },
        testStore: t.testStore,
        clock: t.clock,
        webhookWorker: { pollIntervalMs: 300 },
        env: { WEBHOOK_RETRY_SCHEDULE: '1' },
      });
      await t.services.webhooks.stop();
      const waking = setInterval(() => busy.services.webhooks.wake(t.instance.id), 0);
      try {
        receiver.enqueue({ status: 500, body: 'not now' });
        await t.services.recorder.record(other.id, textMessage('retried'));
        busy.services.webhooks.wake(other.id);
        await receiver.waitForCount(1, 10_000);
        await waitUntil(async () => (await rows()).some((row) => row[0] === 'other' && row[3] === null));
        await letTimePass(t, 5_000);
        const received = await receiver.waitForCount(2, 10_000);
        assert.equal(textOf(received[1]), 'retried');
      } finally {
        clearInterval(waking);
        await busy.close();
        await receiver.close();
      }
    });

    it('events of more instances than free lanes are all delivered without a poll', async () => {
      const t = app.t();
      const { other: bInstance, receiver: b } = await withOther('b');
      const bId = bInstance.id;
      const { other: cInstance, receiver: c } = await withOther('c');
      const cId = cInstance.id;
      try {
        // Two lanes at a time (concurrency 2); three instances' events are queued in one turn.
        await Promise.all([
          t.services.recorder.record(t.instance.id, textMessage('a1')),
          t.services.recorder.record(bId, textMessage('b1')),
          t.services.recorder.record(cId, textMessage('c1')),
        ]);
        await t.services.recorder.record(cId, textMessage('c2'));
        await t.services.recorder.record(bId, textMessage('b2'));
        await t.services.recorder.record(t.instance.id, textMessage('a2'));
        for (const [receiver, prefix] of [
          [app.receiver(), 'a'],
          [b, 'b'],
          [c, 'c'],
        ] as const) {
          const received = await receiver.waitForCount(2, 10_000);
          assert.deepEqual(received.map(textOf), [`${prefix}1`, `${prefix}2`]);
        }
      } finally {
        await b.close();
        await c.close();
      }
    });
  });
}

/** The text of the message a webhook request carries. */
function textOf(request: ReceivedRequest | undefined): string {
  return JSON.parse(request?.body.toString('utf8') ?? '{}').event.message.conversation;
}

/** Resolves once `check` holds, re-checked every 10 ms; fails after 10 s. */
async function waitUntil(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, 'condition not reached within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
