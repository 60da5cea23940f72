import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import {
  accepted,
  assertEndpointSigned,
  assertNotSignedWith,
  createEndpoint,
  ISO,
  receipt,
  textOf,
  typeOf,
  until,
} from './endpoint-support.ts';
import {
  assertSigned,
  configureWebhook,
  createWebhookApp,
  insertPendingDelivery,
  letTimePass,
  textMessage,
} from './support.ts';

/**
 * What an instance's webhook endpoints receive (docs/decisions/0035-webhook-endpoints.md), at real HTTPS receivers:
 * each endpoint only the types its filter names, signed with its own secret (recomputed with node:crypto and checked
 * with `standardwebhooks`); a failing endpoint holding back neither another endpoint nor the default webhook; 410
 * Gone, secret rotation, deletion and redelivery. The API's bodies and refusals: endpoints-api.test.ts.
 */

for (const dialect of testDialects()) {
  describe(`webhook endpoints (${dialect})`, () => {
    let receivers: Receiver[] = [];
    let t: TestApp;
    beforeEach(async () => {
      receivers = await Promise.all([startReceiver(), startReceiver(), startReceiver()]);
      t = await createWebhookApp({ dialect });
    });
    afterEach(async () => {
      await t.close();
      await Promise.all(receivers.map((r) => r.close()));
    });

    it('two endpoints with different filters each receive exactly their types, signed with their own secret', async () => {
      const [main, a, b] = receivers;
      assert.ok(main && a && b);
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      const eb = await createEndpoint(t, { url: b.url, events: ['ReadReceipt'] });
      await t.services.recorder.record(t.instance.id, textMessage('hello'));
      await t.services.recorder.record(t.instance.id, receipt('X1'));
      await t.services.recorder.record(t.instance.id, textMessage('again'));
      await until(
        t,
        'every delivery',
        () => main.requests.length === 3 && a.requests.length === 2 && b.requests.length === 1,
      );
      assert.deepEqual(a.requests.map(typeOf), ['Message', 'Message']);
      assert.deepEqual(a.requests.map(textOf), ['hello', 'again']);
      assert.deepEqual(b.requests.map(typeOf), ['ReadReceipt']);
      for (const request of a.requests) {
        assertEndpointSigned(request, ea.secret);
        assertNotSignedWith(request, eb.secret);
      }
      for (const request of b.requests) {
        assertEndpointSigned(request, eb.secret);
        assertNotSignedWith(request, ea.secret);
      }
      // The default webhook is unchanged: both signatures under the instance HMAC key.
      for (const request of main.requests) assertSigned(request);
      // One webhook-id per event, the same at every endpoint.
      const byText = new Map(
        main.requests.filter((r) => typeOf(r) === 'Message').map((r) => [textOf(r), r.headers['webhook-id']]),
      );
      for (const request of a.requests)
        assert.equal(request.headers['webhook-id'], byText.get(textOf(request)));
      const mainReceipt = main.requests.find((r) => typeOf(r) === 'ReadReceipt');
      assert.equal(b.requests[0]?.headers['webhook-id'], mainReceipt?.headers['webhook-id']);
      // Each endpoint's log lists its own deliveries, with the endpoint's URL on the attempts.
      const log = await t.call('GET', `/v1/webhooks/${ea.id}/deliveries`);
      assert.equal(log.status, 200);
      assert.deepEqual(
        log.body.data.deliveries.map((d: any) => [d.type, d.status, d.attempts.map((x: any) => x.url)]),
        [
          ['Message', 'delivered', [a.url]],
          ['Message', 'delivered', [a.url]],
        ],
      );
      assert.equal(log.body.data.nextCursor, null);
      const paged = await t.call('GET', `/v1/webhooks/${ea.id}/deliveries?limit=1`);
      assert.equal(paged.body.data.deliveries.length, 1);
      assert.equal(typeof paged.body.data.nextCursor, 'string');
      const defaultLog = await t.call('GET', '/v1/webhook/deliveries');
      assert.equal(defaultLog.body.data.deliveries.length, 3);
      for (const entry of defaultLog.body.data.deliveries) {
        assert.deepEqual(
          entry.attempts.map((x: any) => x.url),
          [main.url],
        );
      }
    });

    it('an endpoint answering 500 delays neither the other endpoint nor the default webhook', async () => {
      const [main, a, b] = receivers;
      assert.ok(main && a && b);
      a.respondWith(() => ({ status: 500, body: 'down' }));
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      await createEndpoint(t, { url: b.url, events: ['Message'] });
      await t.services.recorder.record(t.instance.id, textMessage('m1'));
      await until(t, 'the failing endpoint was tried', () => a.requests.length >= 1);
      for (const text of ['m2', 'm3', 'm4'])
        await t.services.recorder.record(t.instance.id, textMessage(text));
      await until(
        t,
        'the others received everything',
        () => accepted(main).length === 4 && accepted(b).length === 4,
      );
      assert.deepEqual(accepted(b).map(textOf), ['m1', 'm2', 'm3', 'm4']);
      assert.deepEqual(accepted(main).map(textOf), ['m1', 'm2', 'm3', 'm4']);
      const log = await t.call('GET', `/v1/webhooks/${ea.id}/deliveries?limit=100`);
      const first = log.body.data.deliveries.at(-1);
      assert.equal(first.status, 'pending');
      assert.equal(first.attempts[0].statusCode, 500);
      assert.equal(first.lastError, 'receiver answered 500');
      // Its retries come when due, while the others went on. Time passes for the due times only while no attempt is
      // in flight: an attempt still running when it passed would be rescheduled from the new time and not come due.
      a.respondWith(() => ({ status: 200, body: 'ok' }));
      await letTimePass(t, 60_000);
      await until(t, 'the endpoint caught up', async () => {
        if (t.services.webhooks.inFlight === 0) await letTimePass(t, 1_000);
        return new Set(accepted(a).map(textOf)).size === 4;
      });
    });

    it('a commit starts an idle endpoint at once while the default webhook of its instance is busy', async () => {
      const [slow, fast] = receivers;
      assert.ok(slow && fast);
      // No poll to speak of: only the commits' wakes and the attempts' ends drive this worker.
      const app = await createWebhookApp({ dialect, webhookWorker: { pollIntervalMs: 600_000 } });
      try {
        await configureWebhook(app, slow.url);
        await createEndpoint(app, { url: fast.url, events: ['Message'] });
        slow.enqueue({ status: 200, body: 'ok', delayMs: 8_000 });
        await app.services.recorder.record(app.instance.id, textMessage('first'));
        await slow.waitForCount(1, 10_000);
        // The endpoint's first attempt has ended (its end woke the worker once) before the next commit: only the
        // default webhook's attempt is in flight.
        await fast.waitForCount(1, 10_000);
        const deadline = Date.now() + 10_000;
        while (app.services.webhooks.inFlight !== 1) {
          assert.ok(Date.now() < deadline, 'the endpoint finished its first attempt');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await app.services.recorder.record(app.instance.id, textMessage('second'));
        // The default webhook's attempt is still held: only the commit's wake can have started this one.
        const received = await fast.waitForCount(2, 4_000);
        assert.deepEqual(received.map(textOf), ['first', 'second']);
        assert.equal(slow.requests.length, 1);
        assert.equal(slow.requests[0]?.reply.status, undefined, 'the default webhook is still answering');
        await slow.waitFor((requests) => requests.length === 2, 15_000);
      } finally {
        await app.close();
      }
    });

    it('410 Gone disables only that endpoint; PATCH enabled:true turns it back on', async () => {
      const [main, a, b] = receivers;
      assert.ok(main && a && b);
      a.respondWith(() => ({ status: 410, body: 'gone' }));
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      await createEndpoint(t, { url: b.url, events: ['Message'] });
      await t.services.recorder.record(t.instance.id, textMessage('g1'));
      await until(t, 'the endpoint is disabled', async () => {
        const view = await t.call('GET', `/v1/webhooks/${ea.id}`);
        return view.body.data.enabled === false;
      });
      const view = (await t.call('GET', `/v1/webhooks/${ea.id}`)).body.data;
      assert.equal(view.disabledReason, 'receiver answered 410 Gone');
      assert.match(view.disabledAt, ISO);
      const seenByA = a.requests.length;
      await t.services.recorder.record(t.instance.id, textMessage('g2'));
      await until(
        t,
        'the others received both',
        () => accepted(main).length === 2 && accepted(b).length === 2,
      );
      assert.equal(a.requests.length, seenByA);
      const config = (await t.call('GET', '/v1/webhook')).body.data;
      assert.equal(config.disabled, false);
      const log = (await t.call('GET', `/v1/webhooks/${ea.id}/deliveries`)).body.data.deliveries;
      assert.deepEqual(
        log.map((d: any) => [d.status, d.lastError]),
        [['failed', 'receiver answered 410 Gone: endpoint disabled']],
      );
      // What a recording transaction that read the routing before the 410 committed leaves: g2 queued to the
      // endpoint after its lane was failed.
      const { db } = t.services.store;
      const g2 = await db
        .selectFrom('webhook_events')
        .select(['id', 'sequence'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('sequence', 'desc')
        .executeTakeFirstOrThrow();
      await insertPendingDelivery(db, {
        eventId: g2.id,
        endpointId: ea.id,
        instanceId: t.instance.id,
        sequence: Number(g2.sequence),
        at: t.clock(),
      });
      a.respondWith(() => ({ status: 200, body: 'ok' }));
      const enabled = await t.call('PATCH', `/v1/webhooks/${ea.id}`, { enabled: true });
      assert.deepEqual(
        [enabled.body.data.enabled, enabled.body.data.disabledAt, enabled.body.data.disabledReason],
        [true, null, null],
      );
      const leftover = await db
        .selectFrom('webhook_deliveries')
        .select(['status', 'last_error'])
        .where('event_id', '=', g2.id)
        .where('endpoint_id', '=', ea.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(leftover, { status: 'failed', last_error: 'receiver answered 410 Gone' });
      await t.services.recorder.record(t.instance.id, textMessage('g3'));
      await until(t, 'the endpoint receives again', () => accepted(a).some((r) => textOf(r) === 'g3'));
      assert.deepEqual(
        accepted(a).map(textOf),
        ['g3'],
        'the delivery queued before the 410 is not sent after enabling',
      );
    });

    it('a 410 of the default webhook fails only its own queue: an endpoint’s pending retry goes on', async () => {
      const [main, a] = receivers;
      assert.ok(main && a);
      main.respondWith(() => ({ status: 410, body: 'gone' }));
      a.enqueue({ status: 500, body: 'not yet' });
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      await t.services.recorder.record(t.instance.id, textMessage('w1'));
      await until(t, 'the default webhook is disabled and the endpoint’s failure recorded', async () => {
        const config = (await t.call('GET', '/v1/webhook')).body.data;
        const log = (await t.call('GET', `/v1/webhooks/${ea.id}/deliveries`)).body.data.deliveries;
        return config.disabled === true && log[0]?.lastError === 'receiver answered 500';
      });
      const waiting = (await t.call('GET', `/v1/webhooks/${ea.id}/deliveries`)).body.data.deliveries;
      assert.deepEqual(
        waiting.map((d: any) => [d.status, d.lastError]),
        [['pending', 'receiver answered 500']],
        'the 410 of the default webhook left the endpoint’s delivery pending',
      );
      const own = (await t.call('GET', '/v1/webhook/deliveries')).body.data.deliveries;
      assert.deepEqual(
        own.map((d: any) => [d.status, d.lastError]),
        [['failed', 'receiver answered 410 Gone: webhook disabled']],
      );
      await letTimePass(t, 1_200);
      // The receiver's 200 first, then the worker's record of it.
      await until(t, 'the endpoint’s retry delivered', async () => {
        const log = (await t.call('GET', `/v1/webhooks/${ea.id}/deliveries`)).body.data.deliveries;
        return log[0]?.status === 'delivered';
      });
      assert.deepEqual(accepted(a).map(textOf), ['w1']);
      assert.equal(main.requests.length, 1);
    });

    it('rotate-secret with no grace changes the signature at once; delete stops deliveries', async () => {
      const [main, a, b] = receivers;
      assert.ok(main && a && b);
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      await createEndpoint(t, { url: b.url, events: ['Message'] });
      await t.services.recorder.record(t.instance.id, textMessage('r1'));
      await until(t, 'first delivery', () => a.requests.length === 1);
      // A grace of 0: the replaced secret signs nothing more (the grace itself: secret-rotation.test.ts).
      const rotated = (
        await t.call('POST', `/v1/webhooks/${ea.id}/rotate-secret`, { previousSecretGraceSeconds: 0 })
      ).body.data;
      await t.services.recorder.record(t.instance.id, textMessage('r2'));
      await until(t, 'second delivery', () => a.requests.length === 2);
      const [before, after] = a.requests;
      assert.ok(before && after);
      assertEndpointSigned(before, ea.secret);
      assertEndpointSigned(after, rotated.secret);
      assertNotSignedWith(after, ea.secret);

      assert.equal((await t.call('DELETE', `/v1/webhooks/${ea.id}`)).status, 200);
      await t.services.recorder.record(t.instance.id, textMessage('r3'));
      await until(t, 'the others received r3', () => accepted(main).length === 3 && accepted(b).length === 3);
      assert.equal(a.requests.length, 2);
      const left = await t.services.store.db
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where('endpoint_id', '=', ea.id)
        .execute();
      assert.deepEqual(left, []);
    });

    it('redeliver: a failed delivery to an endpoint is sent again, signed with its secret; the default webhook’s row is untouched', async () => {
      const [main, a] = receivers;
      assert.ok(main && a);
      a.respondWith(() => ({ status: 500, body: 'down' }));
      await configureWebhook(t, main.url);
      const ea = await createEndpoint(t, { url: a.url, events: ['Message'] });
      await t.services.recorder.record(t.instance.id, textMessage('x1'));
      const endpointLog = async () =>
        (await t.call('GET', `/v1/webhooks/${ea.id}/deliveries?from=${t.instance.id}`)).body.data.deliveries;
      // Every retry is made due at once (WEBHOOK_RETRY_SCHEDULE 1,2,3 seconds) until the last one failed.
      await until(t, 'the endpoint’s delivery failed', async () => {
        await letTimePass(t, 5000);
        return (await endpointLog())[0]?.status === 'failed';
      });
      await until(t, 'the default webhook received it', () => accepted(main).length === 1);
      const [failed] = await endpointLog();
      assert.deepEqual(
        failed.attempts.map((x: { statusCode: number }) => x.statusCode),
        [500, 500, 500, 500],
      );
      const defaultBefore = (await t.call('GET', '/v1/webhook/deliveries')).body.data.deliveries;
      assert.deepEqual(
        defaultBefore.map((d: { id: string; status: string }) => [d.id, d.status]),
        [[failed.id, 'delivered']],
      );

      // Unknown endpoint, another instance's endpoint, unknown event: 404 with the rule's message.
      const other = await t.newInstance('test', 'other');
      for (const [path, message] of [
        [
          `/v1/webhooks/00000000-0000-4000-8000-000000000000/deliveries/${failed.id}/redeliver?from=${t.instance.id}`,
          'webhook endpoint not found',
        ],
        [
          `/v1/webhooks/${ea.id}/deliveries/${failed.id}/redeliver?from=${other.id}`,
          'webhook endpoint not found',
        ],
        [
          `/v1/webhooks/${ea.id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver?from=${t.instance.id}`,
          'delivery not found',
        ],
      ] as const) {
        const response = await t.call('POST', path);
        assert.equal(response.status, 404, `${path}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.error.message, message);
      }

      a.respondWith(() => ({ status: 200, body: 'ok' }));
      const mine = `?from=${t.instance.id}`;
      const redelivered = await t.call(
        'POST',
        `/v1/webhooks/${ea.id}/deliveries/${failed.id.toUpperCase()}/redeliver${mine}`,
      );
      assert.deepEqual(redelivered.body, {
        success: true,
        code: 200,
        data: { details: 'Queued for redelivery', id: failed.id },
      });
      await until(t, 'the endpoint received it', () => accepted(a).length === 1);
      const [arrived] = accepted(a);
      assert.ok(arrived);
      assertEndpointSigned(arrived, ea.secret);
      assert.equal(arrived.headers['webhook-id'], failed.id);
      assert.equal(textOf(arrived), 'x1');
      await until(t, 'the endpoint’s log shows it delivered', async () => {
        const [entry] = await endpointLog();
        return entry?.status === 'delivered';
      });
      const [done] = await endpointLog();
      assert.deepEqual(
        done.attempts.map((x: { number: number; statusCode: number; url: string }) => [
          x.number,
          x.statusCode,
          x.url,
        ]),
        [
          [1, 500, a.url],
          [2, 500, a.url],
          [3, 500, a.url],
          [4, 500, a.url],
          [5, 200, a.url],
        ],
      );
      // The default webhook's delivery was neither queued again nor changed.
      assert.deepEqual(
        (await t.call('GET', `/v1/webhook/deliveries${mine}`)).body.data.deliveries,
        defaultBefore,
      );
      assert.equal(main.requests.length, 1);

      // An event the endpoint's filter left out is not in its log: 404. A disabled endpoint: 409.
      await t.services.recorder.record(t.instance.id, receipt('X2'));
      await until(t, 'the default webhook received the receipt', () => accepted(main).length === 2);
      const [receiptEntry] = (await t.call('GET', `/v1/webhook/deliveries${mine}`)).body.data.deliveries;
      assert.equal(receiptEntry.type, 'ReadReceipt');
      const notQueued = await t.call(
        'POST',
        `/v1/webhooks/${ea.id}/deliveries/${receiptEntry.id}/redeliver${mine}`,
      );
      assert.equal(notQueued.status, 404);
      assert.equal(notQueued.body.error.message, 'delivery not found');
      assert.equal((await t.call('PATCH', `/v1/webhooks/${ea.id}${mine}`, { enabled: false })).status, 200);
      const disabled = await t.call('POST', `/v1/webhooks/${ea.id}/deliveries/${failed.id}/redeliver${mine}`);
      assert.equal(disabled.status, 409);
      assert.equal(
        disabled.body.error.message,
        'webhook endpoint is disabled: turn it on again with PATCH /v1/webhooks/{id} enabled:true',
      );
    });
  });
}
