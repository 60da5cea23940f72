import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import {
  assertSigned,
  configureWebhook,
  createWebhookApp,
  deliveries,
  dueNow,
  insertPendingDelivery,
  letTimePass,
  recordMessages,
  settled,
  textMessage,
  waitForLog,
} from './support.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

for (const dialect of testDialects()) {
  describe(`webhook delivery over real HTTPS (${dialect})`, () => {
    let receiver: Receiver;
    beforeEach(async () => {
      receiver = await startReceiver();
    });
    afterEach(() => receiver.close());

    async function fresh(url = receiver.url): Promise<{ t: TestApp; seen: number }> {
      const t = await createWebhookApp({ dialect });
      await configureWebhook(t, url);
      return { t, seen: receiver.requests.length };
    }

    it('posts a signed Message event: every header of docs/decisions/0006-signatures.md, both signatures recomputed independently', async () => {
      const t = await createWebhookApp({ dialect });
      try {
        await loginSandbox(t);
        await configureWebhook(t, receiver.url);
        const seen = receiver.requests.length;
        await t.services.recorder.record(
          t.instance.id,
          textMessage('hello *world*', { phone: '5511977776666', at: Date.UTC(2025, 5, 1, 12, 0, 0) }),
        );
        const [request] = (await receiver.waitForCount(seen + 1, 10_000)).slice(seen);
        assert.ok(request);
        assert.equal(request.method, 'POST');
        assert.equal(request.url, '/hook');
        assert.equal(request.headers['content-type'], 'application/json');
        assert.match(String(request.headers['webhook-id']), UUID);
        assert.equal(request.headers['webhook-timestamp'], String(Math.floor(t.clock() / 1000)));
        assertSigned(request);
        const body = JSON.parse(request.body.toString('utf8'));
        assert.deepEqual(Object.keys(body), ['type', 'event', 'instanceId', 'sequence']);
        assert.deepEqual(body, {
          type: 'Message',
          event: {
            info: {
              id: body.event.info.id,
              messageSource: {
                chat: '5511977776666@s.whatsapp.net',
                sender: '5511977776666@s.whatsapp.net',
                isFromMe: false,
                isGroup: false,
              },
              pushName: 'Tester',
              timestamp: '2025-06-01T12:00:00.000Z',
            },
            message: { conversation: 'hello *world*' },
          },
          instanceId: t.instance.id,
          // 1 and 2: the login's SessionStatus events (qr, connected); 3: the scan's HistorySync.
          sequence: 4,
        });
        const entries = await waitForLog(t, (e) => e[0]?.status === 'delivered');
        const [message, history] = entries;
        assert.equal(message.id, request.headers['webhook-id']);
        assert.equal(message.sequence, 4);
        assert.equal(message.attempts.length, 1);
        assert.equal(message.attempts[0].statusCode, 200);
        assert.equal(message.attempts[0].responseBody, 'ok');
        assert.equal(message.attempts[0].error, null);
        assert.equal(message.attempts[0].url, receiver.url);
        assert.deepEqual(message.payload, body);
        // The scan's HistorySync came before the URL was set: recorded for the log, not sent
        // (docs/decisions/0018-webhook-events-and-payloads.md).
        assert.equal(history.type, 'HistorySync');
        assert.equal(history.sequence, 3);
        assert.equal(history.status, 'unsent');
        assert.equal(history.reason, 'no webhook URL configured');
        assert.deepEqual(history.attempts, []);
        // The attempt opened the instance's HMAC key and kept it for the next one; the sandbox account's keys,
        // opened through the same box, are not kept (src/security/secrets.ts).
        const row = await t.testStore.store.db
          .selectFrom('instances')
          .select('hmac_key')
          .where('id', '=', t.instance.id)
          .executeTakeFirstOrThrow();
        assert.ok(row.hmac_key !== null && t.services.box.keeps(row.hmac_key), 'the HMAC key is kept');
        assert.equal(t.services.box.keptCount, 1, 'nothing else is kept');
      } finally {
        await t.close();
      }
    });

    it('without an HMAC key sends webhook-id and webhook-timestamp but no signatures', async () => {
      const t = await createWebhookApp({ dialect });
      try {
        await configureWebhook(t, receiver.url, null);
        const seen = receiver.requests.length;
        await recordMessages(t, 1);
        const [request] = (await receiver.waitForCount(seen + 1, 10_000)).slice(seen);
        assert.ok(request);
        assert.match(String(request.headers['webhook-id']), UUID);
        assert.match(String(request.headers['webhook-timestamp']), /^\d{10}$/);
        assert.equal(request.headers['x-hmac-signature'], undefined);
        assert.equal(request.headers['webhook-signature'], undefined);
      } finally {
        await t.close();
      }
    });

    it('with no poll to fall back on, a backlog is delivered in order: each turn that finishes attempts claims the next', async () => {
      // A 10-minute poll: only the worker's own turns (finish, then claim in the same transaction) move the queue.
      const t = await createWebhookApp({ dialect, webhookWorker: { pollIntervalMs: 600_000 } });
      try {
        await configureWebhook(t, receiver.url);
        const seen = receiver.requests.length;
        await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            t.services.recorder.record(t.instance.id, textMessage(`b${i}`)),
          ),
        );
        const requests = (await receiver.waitForCount(seen + 20, 20_000)).slice(seen);
        const sequences = requests.map(
          (request) => JSON.parse(request.body.toString('utf8')).sequence as number,
        );
        assert.equal(new Set(sequences).size, 20);
        assert.deepEqual(
          sequences,
          [...sequences].sort((a, b) => a - b),
        );
        // Every delivery row ends delivered and unlocked, still without a poll.
        const deadline = Date.now() + 10_000;
        let rows: { status: string; locked_by: string | null }[] = [];
        while (Date.now() < deadline) {
          rows = await t.services.store.db
            .selectFrom('webhook_deliveries')
            .select(['status', 'locked_by'])
            .where('instance_id', '=', t.instance.id)
            .execute();
          if (rows.every((row) => row.status === 'delivered')) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.deepEqual(
          new Set(rows.map((row) => `${row.status}/${row.locked_by}`)),
          new Set(['delivered/null']),
        );
      } finally {
        await t.close();
      }
    });

    it('a receiver failing twice gets the event on the third attempt; three attempts are logged', async () => {
      const { t, seen } = await fresh();
      try {
        receiver.enqueue(
          { status: 500, body: 'boom' },
          { status: 503, headers: { 'retry-after': '1' }, body: 'later' },
        );
        // Due times are on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times"): each attempt
        // failed between two readings of it, so its retry is due its delay after the first, at most after the second.
        const start = t.clock();
        let before = dueNow(t);
        await recordMessages(t, 1);
        let [entry] = await waitForLog(t, (e) => settled(e[0], 1) && e[0].status === 'pending');
        assert.equal(entry.status, 'pending');
        assert.equal(entry.attempts[0].statusCode, 500);
        assert.equal(entry.attempts[0].error, 'receiver answered 500');
        assert.equal(entry.attempts[0].responseBody, 'boom');
        let after = dueNow(t);
        const firstAt = Date.parse(entry.nextAttemptAt);
        assert.ok(
          firstAt - before >= 1000 && firstAt - after <= 1200,
          `first retry after 1 s to 1.2 s (0 to +20 %), got ${firstAt - before} to ${firstAt - after} ms`,
        );
        before = dueNow(t);
        await letTimePass(t, 1200);
        [entry] = await waitForLog(t, (e) => settled(e[0], 2) && e[0].status === 'pending');
        after = dueNow(t);
        assert.equal(entry.attempts[1].statusCode, 503);
        // Retry-After 1 s is clamped to 1×–2× the scheduled 2 s: 2 s, no jitter.
        const secondAt = Date.parse(entry.nextAttemptAt);
        assert.ok(
          secondAt - before >= 2000 && secondAt - after <= 2000,
          `second retry after 2 s, got ${secondAt - before} to ${secondAt - after} ms`,
        );
        await letTimePass(t, 2000);
        [entry] = await waitForLog(t, (e) => e[0]?.status === 'delivered');
        assert.deepEqual(
          entry.attempts.map((a: any) => [a.number, a.statusCode]),
          [
            [1, 500],
            [2, 503],
            [3, 200],
          ],
        );
        const got = receiver.requests.slice(seen);
        assert.equal(got.length, 3);
        assert.deepEqual(new Set(got.map((r) => r.headers['webhook-id'])), new Set([entry.id]));
        for (const request of got) assertSigned(request);
        assert.deepEqual(
          got.map((r) => Number(r.headers['webhook-timestamp'])),
          [start, start + 1200, start + 3200].map((ms) => Math.floor(ms / 1000)),
        );
        const metrics = (await t.app.inject({ url: '/metrics' })).body;
        assert.match(metrics, /parley_webhook_attempts_total\{outcome="retry"\} 2/);
        assert.match(metrics, /parley_webhook_attempts_total\{outcome="delivered"\} 1/);
        assert.match(metrics, /parley_webhook_attempt_duration_seconds_count 3/);
      } finally {
        await t.close();
      }
    });

    it('410 Gone disables the webhook and fails what is pending; setting the URL again re-enables it', async () => {
      // One request at a time (`WEBHOOK_LANE_WINDOW=1`): the 410 answers the only request started; a window's
      // requests in flight are settled by their own answers (test/webhooks/lane-windows.test.ts).
      const t = await createWebhookApp({ dialect, webhookWorker: { start: false, laneWindow: 1 } });
      try {
        await configureWebhook(t, receiver.url);
        const seen = receiver.requests.length;
        receiver.enqueue({ status: 410, body: 'gone' });
        await recordMessages(t, 3);
        assert.equal(
          await t.services.webhooks.runOnce(),
          1,
          'only the first event is started (order per URL)',
        );
        assert.equal(receiver.requests.length, seen + 1);
        const entries = (await deliveries(t)).body.data.deliveries;
        assert.deepEqual(
          entries.map((e: any) => [e.sequence, e.status, e.attempts.length]),
          [
            [3, 'failed', 0],
            [2, 'failed', 0],
            [1, 'failed', 1],
          ],
        );
        assert.equal(entries[0].lastError, 'webhook disabled: receiver answered 410 Gone');
        assert.equal(entries[2].attempts[0].statusCode, 410);
        const config = await t.call('GET', '/v1/webhook');
        assert.equal(config.status, 200);
        assert.equal(config.body.data.disabled, true);
        assert.equal(config.body.data.disabledReason, 'receiver answered 410 Gone');
        assert.equal(config.body.data.disabledAt, new Date(t.clock()).toISOString());
        await recordMessages(t, 1, 'after');
        const [latest] = (await deliveries(t, 'limit=1')).body.data.deliveries;
        assert.equal(latest.status, 'unsent');
        assert.equal(latest.reason, 'webhook disabled: receiver answered 410 Gone');
        const refused = await t.call('POST', `/v1/webhook/deliveries/${latest.id}/redeliver`);
        assert.equal(refused.status, 409);
        assert.match(refused.body.error.message, /^webhook is disabled/);
        assert.equal(await t.services.webhooks.runOnce(), 0);

        // What a recording transaction that read the routing before the 410 committed leaves: the `after` event
        // queued after the lane was failed. Setting the URL again fails it rather than sending it.
        const { db } = t.services.store;
        const after = await db
          .selectFrom('webhook_events')
          .select(['sequence'])
          .where('id', '=', latest.id)
          .executeTakeFirstOrThrow();
        await insertPendingDelivery(db, {
          eventId: latest.id,
          endpointId: '',
          instanceId: t.instance.id,
          sequence: Number(after.sequence),
          at: t.clock(),
        });
        await configureWebhook(t, receiver.url, null);
        assert.equal((await t.call('GET', '/v1/webhook')).body.data.disabled, false);
        const leftover = await db
          .selectFrom('webhook_deliveries')
          .select(['status', 'last_error'])
          .where('event_id', '=', latest.id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(leftover, { status: 'failed', last_error: 'receiver answered 410 Gone' });
        const again = await t.call('POST', `/v1/webhook/deliveries/${entries[2].id}/redeliver`);
        assert.deepEqual(again.body, {
          success: true,
          code: 200,
          data: { details: 'Queued for redelivery', id: entries[2].id },
        });
        assert.equal(await t.services.webhooks.runOnce(), 1);
        const [redelivered] = (await deliveries(t, 'status=delivered')).body.data.deliveries;
        assert.equal(redelivered.id, entries[2].id);
        assert.deepEqual(
          redelivered.attempts.map((a: any) => [a.number, a.statusCode]),
          [
            [1, 410],
            [2, 200],
          ],
        );
      } finally {
        await t.close();
      }
    });

    it('a 301 is a failed attempt and is not followed', async () => {
      const { t, seen } = await fresh();
      try {
        receiver.enqueue({ status: 301, headers: { location: `${receiver.origin}/moved` } });
        await recordMessages(t, 1);
        const [entry] = await waitForLog(t, (e) => settled(e[0], 1) && e[0].status === 'pending');
        assert.equal(entry.attempts[0].statusCode, 301);
        assert.equal(entry.attempts[0].error, 'receiver answered 301: redirects are not followed');
        assert.equal(receiver.requests.length, seen + 1);
        assert.equal(receiver.requests.filter((r) => r.url === '/moved').length, 0);
        await letTimePass(t, 1200);
        const [done] = await waitForLog(t, (e) => e[0]?.status === 'delivered');
        assert.equal(done.attempts.length, 2);
        assert.deepEqual(
          receiver.requests.slice(seen).map((r) => r.url),
          ['/hook', '/hook'],
        );
      } finally {
        await t.close();
      }
    });

    it('refuses a URL resolving to 127.0.0.1 without WEBHOOK_ALLOWED_CIDRS, at configuration and at delivery', async () => {
      const testStore = await createTestStore(dialect);
      const allowed = await createWebhookApp({ dialect, testStore, webhookWorker: { start: false } });
      const strict = await createTestApp({
        testStore,
        outboundCa: TEST_CA,
        webhookWorker: { start: false },
      });
      try {
        // docs/decisions/0020-security-promises.md: a name resolving to loopback, a loopback literal and a name that
        // does not resolve at all (.invalid, RFC 6761) get one answer, so the endpoint cannot map internal names to
        // addresses.
        const refused = {
          error: {
            code: 400,
            message: 'webhookUrl is refused: the host does not resolve to an allowed public address',
          },
        };
        for (const webhookUrl of [
          `https://localhost:${receiver.port}/hook`,
          receiver.url,
          'https://parley-test.invalid/hook',
        ]) {
          const response = await strict.call('POST', '/v1/webhook', { webhookUrl });
          assert.equal(response.status, 400, webhookUrl);
          assert.deepEqual(response.body, refused, webhookUrl);
        }

        // Configured while allowed, then attempted by a worker whose guard has no allowance: refused, logged.
        await configureWebhook(allowed, receiver.url);
        const seen = receiver.requests.length;
        await recordMessages(allowed, 1);
        // The delivery is due on the store's clock as the recording app estimated it; the other app's estimate may
        // be a few milliseconds behind (half a round trip, docs/decisions/0008-leases-and-fencing.md "One clock").
        await eventually('the strict worker attempts the delivery', async () => {
          return (await strict.services.webhooks.runOnce()) === 1;
        });
        assert.equal(receiver.requests.length, seen);
        const [entry] = (await deliveries(allowed)).body.data.deliveries;
        assert.equal(entry.status, 'pending');
        assert.equal(entry.attempts.length, 1);
        assert.equal(entry.attempts[0].statusCode, null);
        // The tenant reads the caller-safe text only: no address, no range
        // (docs/decisions/0020-security-promises.md).
        assert.equal(entry.attempts[0].error, 'the host does not resolve to an allowed public address');
        assert.equal(entry.lastError, 'the host does not resolve to an allowed public address');
      } finally {
        await strict.close();
        await allowed.close();
        await testStore.cleanup();
      }
    });
  });
}
