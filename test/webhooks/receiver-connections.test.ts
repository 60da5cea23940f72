/**
 * How a lane's window meets receivers that do not keep up a pipeline (docs/decisions/0058-pipelined-lanes.md): one
 * that closes its connection after every answer gets each event once, as one request at a time would give it; one
 * that answers a connection's requests one after the other gets no time-out while each answer comes in time after
 * the one before it. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestApp } from '../support/app.ts';
import { type Receiver, type ReceiverReply, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, recordMessages } from './support.ts';

/** What the receiver got and what the lane logged: requests, distinct events, attempts and their errors. */
async function outcome(t: TestApp, receiver: Receiver) {
  const db = t.testStore.store.db;
  const attempts = await db.selectFrom('webhook_attempts').select(['error', 'status_code']).execute();
  const deliveries = await db.selectFrom('webhook_deliveries').select('status').execute();
  const ids = receiver.requests.map((request) => String(request.headers['webhook-id']));
  return {
    received: ids.length,
    events: new Set(ids).size,
    attempts: attempts.length,
    errors: attempts.filter((attempt) => attempt.error !== null).map((attempt) => attempt.error),
    delivered: deliveries.filter((delivery) => delivery.status === 'delivered').length,
  };
}

for (const dialect of testDialects()) {
  describe(`lane windows and how receivers keep connections (${dialect})`, () => {
    it('a receiver closing its connection after every answer gets each event once at the default window', async () => {
      const receiver = await startReceiver({
        fallback: { status: 200, body: 'ok', headers: { connection: 'close' } },
      });
      // The default window (64), a batch as large.
      const t = await createWebhookApp({ dialect, webhookWorker: { start: false, laneBatch: 64 } });
      try {
        await configureWebhook(t, receiver.url);
        await recordMessages(t, 64);
        assert.equal(await t.services.webhooks.runOnce(), 64);
        assert.deepEqual(await outcome(t, receiver), {
          received: 64,
          events: 64,
          attempts: 64,
          errors: [],
          delivered: 64,
        });
      } finally {
        await t.close();
        await receiver.close();
      }
    });

    it("a receiver answering a connection's requests one after the other times none out", async () => {
      const receiver = await startReceiver();
      // Each answer 250 ms after the one before it on the same connection: 4 s for the sixteenth, against a 2 s
      // attempt time-out that each answer meets counted from the one before it.
      const answered = new Map<number, Promise<unknown>>();
      receiver.respondWith((request) => {
        const before = answered.get(request.remotePort) ?? Promise.resolve();
        const reply = before.then(() => sleep(250)).then((): ReceiverReply => ({ status: 200, body: 'ok' }));
        answered.set(request.remotePort, reply);
        return reply;
      });
      const t = await createWebhookApp({
        dialect,
        env: { WEBHOOK_TIMEOUT_SECONDS: '2', WEBHOOK_RETRY_SCHEDULE: '60' },
        webhookWorker: { start: false, laneWindow: 16, laneBatch: 16 },
      });
      try {
        await configureWebhook(t, receiver.url);
        await recordMessages(t, 16);
        assert.equal(await t.services.webhooks.runOnce(), 16);
        assert.deepEqual(await outcome(t, receiver), {
          received: 16,
          events: 16,
          attempts: 16,
          errors: [],
          delivered: 16,
        });
      } finally {
        await t.close();
        await receiver.close();
      }
    });
  });
}
