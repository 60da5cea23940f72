import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Instance } from '../../src/domain/instance.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { HMAC_KEY, textMessage, webhookAppPerTest } from './support.ts';

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
        respond: () => new Promise((resolve) => held.push(() => resolve({ status: 200, body: 'ok' }))),
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

/** Resolves once `check` holds, re-checked every 10 ms; fails after 10 s. */
async function waitUntil(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    assert.ok(Date.now() < deadline, 'condition not reached within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
