/**
 * A lane batch's requests never outlive its claim (docs/decisions/0058-pipelined-lanes.md, "A request never outlives
 * its claim"): a request written behind others on a lane's pipelined connection counts its time-out from the answer
 * before it, but it never stays in flight past half the stale timeout plus one attempt time-out from its claim, the
 * bound one request at a time always kept. A receiver answering a deep window one request after the other, each answer
 * within its time-out, once kept requests in flight after their claim went stale: the worker then claimed the lane
 * again and sent those deliveries a second time on another connection while the first requests still waited for
 * their answers. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually } from '../support/eventually.ts';
import { type ReceiverReply, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, knownReceiver, recordMessages } from './support.ts';

/** Each answer on the first connection comes this long after the one before it, ms: within the 2 s time-out. */
const ANSWER_GAP_MS = 1_500;

for (const dialect of testDialects()) {
  describe(`a lane window's requests and the age of their claim [${dialect}]`, () => {
    it('ends every request before its claim can go stale: no delivery is delivered twice without a failure between', async () => {
      const receiver = await startReceiver();
      // Each connection answers its requests one after the other, each ANSWER_GAP_MS after the one before it: the
      // first connection (the window's); a later one (requests tried again) at once.
      let first: number | undefined;
      const answered = new Map<number, Promise<unknown>>();
      receiver.respondWith((request) => {
        first ??= request.remotePort;
        if (request.remotePort !== first) return { status: 200, body: 'ok' };
        const before = answered.get(request.remotePort) ?? Promise.resolve();
        const reply = before
          .then(() => sleep(ANSWER_GAP_MS))
          .then((): ReceiverReply => ({ status: 200, body: 'ok' }));
        answered.set(request.remotePort, reply);
        return reply;
      });
      // A 2 s attempt time-out and a 6 s stale timeout (more than twice it): a window of six answered 1.5 s apart
      // takes 9 s, each request within its time-out counted from the answer before it.
      const t = await createWebhookApp({
        dialect,
        env: { WEBHOOK_TIMEOUT_SECONDS: '2', WEBHOOK_RETRY_SCHEDULE: '1,1,1' },
        webhookWorker: { start: false, staleAfterMs: 6_000, laneWindow: 6, laneBatch: 6 },
      });
      try {
        await configureWebhook(t, receiver.url);
        await knownReceiver(t, receiver);
        await recordMessages(t, 6);
        t.services.webhooks.start();
        const db = t.testStore.store.db;
        // Every event delivered (requests cut at their claim's bound are tried again on the schedule) and no
        // request of any lane batch left in flight.
        await eventually(
          'every delivery delivered and no request in flight',
          async () => {
            const rows = await db.selectFrom('webhook_deliveries').select('status').execute();
            return (
              rows.length === 6 &&
              rows.every((row) => row.status === 'delivered') &&
              t.services.webhooks.requestsInFlight === 0
            );
          },
          30_000,
        );
        const attempts = await db
          .selectFrom('webhook_attempts')
          .select(['event_id', 'status_code', 'error'])
          .orderBy('event_id')
          .orderBy('number')
          .execute();
        const deliveredTwice = [...new Set(attempts.map((attempt) => attempt.event_id))].filter(
          (id) =>
            attempts.filter((attempt) => attempt.event_id === id && attempt.status_code === 200).length > 1,
        );
        assert.deepEqual(deliveredTwice, [], 'no delivery answered 200 twice');
        assert.equal(
          receiver.requests.filter((request) => request.reply.state === 'completed').length,
          attempts.filter((attempt) => attempt.status_code === 200).length,
          'each answer the receiver completed is one delivered attempt',
        );
      } finally {
        await t.close();
        await receiver.close();
      }
    });
  });
}
