import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testDialects } from '../support/store.ts';
import { createEndpoint, ISO, until } from './endpoint-support.ts';
import { textMessage, webhookAppPerTest } from './support.ts';

/**
 * `/v1/webhooks` (docs/decisions/0035-webhook-endpoints.md): an instance's endpoints created, listed, read, changed
 * and deleted with exact bodies and statuses, the secret shown only at creation and rotation, bad input refused
 * naming the field and the rule, the cap of ten endpoints, and the `chat:webhook` scope. What the endpoints
 * receive: endpoints.test.ts.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
for (const dialect of testDialects()) {
  describe(`webhook endpoints over the API (${dialect})`, () => {
    const each = webhookAppPerTest({ dialect }, { configured: false });
    const t = () => each.t();

    it('CRUD: exact bodies and statuses, the secret only at creation and rotation, 404 across instances', async () => {
      const a = each.receiver();
      const created = await t().call('POST', '/v1/webhooks', {
        url: a.url,
        events: ['Message', 'ReadReceipt'],
        description: 'orders',
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(created.body.success, true);
      assert.equal(created.body.code, 201);
      const endpoint = created.body.data;
      assert.match(endpoint.id, UUID);
      assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      assert.equal(Buffer.from(endpoint.secret.slice(6), 'base64').length, 32);
      assert.match(endpoint.createdAt, ISO);
      const view = {
        id: endpoint.id,
        url: a.url,
        events: ['Message', 'ReadReceipt'],
        description: 'orders',
        enabled: true,
        disabledAt: null,
        disabledReason: null,
        previousSecretExpiresAt: null,
        createdAt: endpoint.createdAt,
        updatedAt: endpoint.createdAt,
      };
      assert.deepEqual(endpoint, { ...view, secret: endpoint.secret });

      const list = await t().call('GET', '/v1/webhooks');
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.data, { endpoints: [view] });
      const one = await t().call('GET', `/v1/webhooks/${endpoint.id}`);
      assert.equal(one.status, 200);
      assert.deepEqual(one.body.data, view);
      assert.doesNotMatch(JSON.stringify([list.body, one.body]), /whsec_/);

      t().clock.advance(1000);
      const patched = await t().call('PATCH', `/v1/webhooks/${endpoint.id}`, {
        events: ['Call'],
        description: null,
        enabled: false,
      });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.deepEqual(patched.body.data, {
        ...view,
        events: ['Call'],
        description: null,
        enabled: false,
        updatedAt: new Date(Date.parse(endpoint.createdAt) + 1000).toISOString(),
      });

      const rotated = await t().call('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`);
      assert.equal(rotated.status, 200);
      assert.match(rotated.body.data.secret, /^whsec_/);
      assert.notEqual(rotated.body.data.secret, endpoint.secret);
      // The replaced secret signs besides the new one for 24 hours (docs/decisions/0094-secret-rotation-grace.md).
      assert.equal(
        rotated.body.data.previousSecretExpiresAt,
        new Date(Date.parse(endpoint.createdAt) + 1000 + 86_400_000).toISOString(),
      );

      // Another instance of the same org: the endpoint does not exist there.
      const other = await t().newInstance('test', 'other');
      for (const [method, path] of [
        ['GET', ''],
        ['PATCH', ''],
        ['DELETE', ''],
        ['POST', '/rotate-secret'],
        ['GET', '/deliveries'],
      ] as const) {
        const response = await t().call(
          method,
          `/v1/webhooks/${endpoint.id}${path}?from=${other.id}`,
          method === 'PATCH' ? { enabled: true } : undefined,
        );
        assert.equal(response.status, 404, `${method} ${path}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.error.message, 'webhook endpoint not found');
      }
      assert.deepEqual((await t().call('GET', `/v1/webhooks?from=${other.id}`)).body.data, { endpoints: [] });

      const mine = `?from=${t().instance.id}`;
      const removed = await t().call('DELETE', `/v1/webhooks/${endpoint.id}${mine}`);
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      assert.deepEqual(removed.body.data, { details: 'Webhook endpoint deleted' });
      assert.equal((await t().call('GET', `/v1/webhooks/${endpoint.id}${mine}`)).status, 404);
      assert.equal((await t().call('DELETE', `/v1/webhooks/${endpoint.id}${mine}`)).status, 404);
    });

    it('takes endpoint ids in any case, as event ids: read, change, log, redeliver, rotate and delete', async () => {
      const a = each.receiver();
      const endpoint = await createEndpoint(t(), { url: a.url, events: ['Message'] });
      const upper = endpoint.id.toUpperCase();
      assert.notEqual(upper, endpoint.id);
      const one = await t().call('GET', `/v1/webhooks/${upper}`);
      assert.equal(one.status, 200, JSON.stringify(one.body));
      assert.equal(one.body.data.id, endpoint.id);
      const patched = await t().call('PATCH', `/v1/webhooks/${upper}`, { description: 'upper' });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.deepEqual([patched.body.data.id, patched.body.data.description], [endpoint.id, 'upper']);

      await t().services.recorder.record(t().instance.id, textMessage('case'));
      await until(t(), 'delivered', async () => {
        const log = await t().call('GET', `/v1/webhooks/${endpoint.id}/deliveries`);
        return log.body.data.deliveries[0]?.status === 'delivered';
      });
      const log = await t().call('GET', `/v1/webhooks/${upper}/deliveries`);
      assert.equal(log.status, 200, JSON.stringify(log.body));
      assert.equal(log.body.data.deliveries.length, 1);
      const eventId: string = log.body.data.deliveries[0].id;
      const again = await t().call(
        'POST',
        `/v1/webhooks/${upper}/deliveries/${eventId.toUpperCase()}/redeliver`,
      );
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual(again.body.data, { details: 'Queued for redelivery', id: eventId });
      await until(t(), 'delivered again', () => a.requests.length === 2);

      const rotated = await t().call('POST', `/v1/webhooks/${upper}/rotate-secret`);
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      assert.equal(rotated.body.data.id, endpoint.id);
      const removed = await t().call('DELETE', `/v1/webhooks/${upper}`);
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      assert.equal((await t().call('GET', `/v1/webhooks/${endpoint.id}`)).status, 404);
    });

    it('refuses bad input naming the field and the rule, and an 11th endpoint', async () => {
      const a = each.receiver();
      const unknown = await t().call('POST', '/v1/webhooks', { url: a.url, events: ['Message', 'Nope'] });
      assert.equal(unknown.status, 400);
      assert.match(
        unknown.body.error.message,
        /unknown event type Nope \(allowed: Message, ReadReceipt, HistorySync/,
      );
      const http = await t().call('POST', '/v1/webhooks', {
        url: 'http://example.com/hook',
        events: ['Message'],
      });
      assert.equal(http.status, 400);
      assert.equal(
        http.body.error.message,
        'url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL',
      );
      const empty = await t().call('POST', '/v1/webhooks', { url: a.url, events: [] });
      assert.equal(empty.status, 400);
      assert.match(empty.body.error.message, /events/);
      const missing = await t().call('POST', '/v1/webhooks', { events: ['Message'] });
      assert.equal(missing.status, 400);
      assert.match(missing.body.error.message, /url/);
      for (let i = 0; i < 10; i++) await createEndpoint(t(), { url: a.url, events: ['Message'] });
      const eleventh = await t().call('POST', '/v1/webhooks', { url: a.url, events: ['Message'] });
      assert.equal(eleventh.status, 409);
      assert.equal(eleventh.body.error.message, 'an instance has at most 10 webhook endpoints');
      const other = await t().newInstance('test', 'other');
      await createEndpoint(t(), { url: a.url, events: ['Message'] }, `?from=${other.id}`);
    });

    it('scope chat:webhook: 403 naming it without', async () => {
      const key = await t().newKey({ scopes: ['chat:messages'] });
      const response = await t().call('GET', '/v1/webhooks', undefined, { authorization: `Bearer ${key}` });
      assert.equal(response.status, 403);
      assert.match(response.body.error.message, /chat:webhook/);
    });
  });
}
