import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { adminCreateUser } from '../../src/app/users.ts';
import type { TestApp } from '../support/app.ts';
import { type ReceivedRequest, type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { createWebhookApp, textMessage } from '../webhooks/support.ts';
import { createUser, type DashboardClient, PASSWORD, signIn } from './support.ts';

const error = (code: number, message: string) => ({ error: { code, message } });

/** Every event type, in canonical order (written out: the test pins the list the page offers). */
const ALL_TYPES = [
  'Message',
  'ReadReceipt',
  'HistorySync',
  'ChatPresence',
  'MessageUpdate',
  'GroupUpdate',
  'Call',
  'PollVote',
  'SessionStatus',
  'MessageStatus',
];

/** Whether `request` verifies with the endpoint secret `secret` (npm standardwebhooks). */
function verifies(request: ReceivedRequest, secret: string): boolean {
  try {
    new Webhook(secret).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
    return true;
  } catch {
    return false;
  }
}

/** One delivery log entry as the dashboard answers it (the fields this test reads). */
interface Entry {
  id: string;
  status: string;
  attempts: { number: number; statusCode: number | null }[];
}

for (const dialect of testDialects()) {
  describe(`dashboard API: webhook endpoints through WebhookEndpointService [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    let member: DashboardClient;
    let viewer: DashboardClient;
    let base = '';
    before(async () => {
      t = await createWebhookApp({ dialect });
      member = await signIn(t, await createUser(t, 'member'));
      viewer = await signIn(t, await createUser(t, 'viewer'));
      base = `/instances/${t.instance.id}/endpoints`;
    });
    after(() => t.close());
    beforeEach(async () => {
      receiver = await startReceiver();
    });
    afterEach(async () => {
      for (const endpoint of (await member.call('GET', base)).body.data.endpoints)
        await member.call('DELETE', `${base}/${endpoint.id}`);
      await receiver.close();
    });

    it('creates (201, the secret in that answer only), lists, changes, rotates and deletes with the API’s rules', async () => {
      const made = await member.call('POST', base, {
        url: receiver.url,
        events: ['ReadReceipt', 'Message'],
        description: 'orders',
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.equal(made.body.success, true);
      assert.equal(made.body.code, 201);
      const { secret, ...view } = made.body.data;
      assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      assert.deepEqual(
        { ...view, id: '', createdAt: '', updatedAt: '' },
        {
          id: '',
          url: receiver.url,
          events: ['ReadReceipt', 'Message'],
          description: 'orders',
          enabled: true,
          disabledAt: null,
          disabledReason: null,
          previousSecretExpiresAt: null,
          createdAt: '',
          updatedAt: '',
        },
      );

      const list = await viewer.call('GET', base);
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.data, { endpoints: [view], eventTypes: ALL_TYPES });
      assert.doesNotMatch(JSON.stringify(list.body), /whsec_/);
      // The same endpoint the API sees: one service behind both.
      assert.deepEqual((await t.call('GET', `/v1/webhooks/${view.id}`)).body.data, view);

      const changed = await member.call('PATCH', `${base}/${view.id}`, {
        events: ['Call'],
        description: null,
        enabled: false,
      });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      assert.deepEqual(
        [changed.body.data.events, changed.body.data.description, changed.body.data.enabled],
        [['Call'], null, false],
      );
      const enabled = await member.call('PATCH', `${base}/${view.id}`, { enabled: true });
      assert.equal(enabled.body.data.enabled, true);

      const rotated = await member.call('POST', `${base}/${view.id}/rotate-secret`);
      assert.equal(rotated.status, 200);
      assert.match(rotated.body.data.secret, /^whsec_/);
      assert.notEqual(rotated.body.data.secret, secret);
      assert.equal(rotated.body.data.id, view.id);
      // The replaced secret signs besides the new one for 24 hours, as through /v1
      // (docs/decisions/0094-secret-rotation-grace.md); a grace of 0 ends it at once, and a bad one is refused.
      assert.equal(rotated.body.data.previousSecretExpiresAt, new Date(t.clock() + 86_400_000).toISOString());
      const ended = await member.call('POST', `${base}/${view.id}/rotate-secret`, {
        previousSecretGraceSeconds: 0,
      });
      assert.equal(ended.status, 200, JSON.stringify(ended.body));
      assert.equal(ended.body.data.previousSecretExpiresAt, null);
      const refused = await member.call('POST', `${base}/${view.id}/rotate-secret`, {
        previousSecretGraceSeconds: -1,
      });
      assert.equal(refused.status, 400);
      assert.match(
        refused.body.error.message,
        /^previousSecretGraceSeconds must be an integer from 0 to 604800/,
      );

      const removed = await member.call('DELETE', `${base}/${view.id}`);
      assert.deepEqual(removed.body, {
        success: true,
        code: 200,
        data: { details: 'Webhook endpoint deleted' },
      });
      const again = await member.call('DELETE', `${base}/${view.id}`);
      assert.deepEqual(again.body, error(404, 'webhook endpoint not found'));
      assert.deepEqual((await member.call('GET', base)).body.data.endpoints, []);
    });

    it('refuses bad input naming the field and the rule, as the API does', async () => {
      const http = await member.call('POST', base, { url: 'http://example.com/hook', events: ['Message'] });
      assert.deepEqual(
        http.body,
        error(400, 'url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL'),
      );
      const unknown = await member.call('POST', base, { url: receiver.url, events: ['Typing'] });
      assert.deepEqual(
        unknown.body,
        error(400, `events contains unknown event type Typing (allowed: ${ALL_TYPES.join(', ')})`),
      );
      const none = await member.call('POST', base, { url: receiver.url, events: [] });
      assert.deepEqual(none.body, error(400, 'events must list 1 to 32 event types'));
      const made = await member.call('POST', base, { url: receiver.url, events: ['Message'] });
      const patch = await member.call('PATCH', `${base}/${made.body.data.id}`, { url: 'ftp://example.com/' });
      assert.deepEqual(
        patch.body,
        error(400, 'url must be an HTTPS URL or an amqp://, amqps:// or nats:// broker URL'),
      );
    });

    it('shows an endpoint’s delivery log and redelivers one event, signed with the endpoint’s secret', async () => {
      const made = await member.call('POST', base, { url: receiver.url, events: ['Message'] });
      const { id, secret } = made.body.data;
      await t.services.recorder.record(t.instance.id, textMessage('to the endpoint'));
      const [first] = await receiver.waitForCount(1, 10_000);
      assert.ok(first);
      assert.ok(verifies(first, secret));
      const eventId = String(first.headers['webhook-id']);
      const log = async (): Promise<Entry[]> => {
        const page = await viewer.call('GET', `${base}/${id}/deliveries?limit=5`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        return page.body.data.deliveries;
      };
      for (let i = 0; i < 200 && (await log())[0]?.status !== 'delivered'; i++)
        await new Promise((resolve) => setTimeout(resolve, 25));
      const [entry] = await log();
      assert.deepEqual(
        [entry?.id, entry?.status, entry?.attempts.map((a) => [a.number, a.statusCode])],
        [eventId, 'delivered', [[1, 200]]],
      );

      const redelivered = await member.call('POST', `${base}/${id}/deliveries/${eventId}/redeliver`);
      assert.deepEqual(redelivered.body, {
        success: true,
        code: 200,
        data: { details: 'Redelivery queued', id: eventId },
      });
      const [, second] = await receiver.waitForCount(2, 10_000);
      assert.ok(second);
      assert.equal(second.headers['webhook-id'], eventId);
      assert.ok(verifies(second, secret));
      assert.equal(second.headers['x-hmac-signature'], undefined);

      const unknown = await member.call(
        'POST',
        `${base}/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`,
      );
      assert.deepEqual(unknown.body, error(404, 'delivery not found'));
      const noEndpoint = await viewer.call('GET', `${base}/00000000-0000-4000-8000-000000000000/deliveries`);
      assert.deepEqual(noEndpoint.body, error(404, 'webhook endpoint not found'));
    });

    it('refuses a change without the CSRF token, a viewer’s change, and another organization’s or instance’s endpoint', async () => {
      const made = await member.call('POST', base, { url: receiver.url, events: ['Message'] });
      const id: string = made.body.data.id;
      const changes = [
        ['POST', base, { url: receiver.url, events: ['Message'] }],
        ['PATCH', `${base}/${id}`, { enabled: false }],
        ['DELETE', `${base}/${id}`, undefined],
        ['POST', `${base}/${id}/rotate-secret`, undefined],
        ['POST', `${base}/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`, undefined],
      ] as const;
      for (const [method, path, body] of changes) {
        const noCsrf = await member.call(method, path, body, { csrf: false });
        assert.deepEqual(noCsrf.body, error(403, 'missing or invalid CSRF token'), `${method} ${path}`);
        const wrongCsrf = await member.call(method, path, body, { csrf: 'not-the-token' });
        assert.equal(wrongCsrf.status, 403, `${method} ${path}`);
        const byViewer = await viewer.call(method, path, body);
        assert.deepEqual(
          byViewer.body,
          error(403, 'this needs the member role (you are viewer)'),
          `${method} ${path}`,
        );
      }
      const anonymous = await t.app.inject({ method: 'GET', url: `/dashboard/api${base}` });
      assert.equal(anonymous.statusCode, 401);
      // Nothing changed: still one endpoint, enabled, with its secret.
      const [kept] = (await member.call('GET', base)).body.data.endpoints;
      assert.deepEqual([kept.id, kept.enabled], [id, true]);

      // A user of another organization: this organization's instance does not exist for them.
      const org = await adminCreateOrg(t.testStore.store.db, { name: `other-${Date.now()}` });
      const email = `stranger-${Date.now()}@example.com`;
      await adminCreateUser(t.testStore.store.db, { org: org.id, email, role: 'owner', password: PASSWORD });
      const stranger = await signIn(t, email);
      for (const [method, path, body] of [
        ['GET', base, undefined],
        ['GET', `${base}/${id}/deliveries`, undefined],
        ...changes,
      ] as const) {
        const response = await stranger.call(method, path, body);
        assert.deepEqual(response.body, error(404, 'instance not found'), `${method} ${path}`);
      }
      // Nor does another organization's instance for this organization's member.
      const foreign = await adminCreateInstance(t.testStore.store.db, {
        org: org.id,
        env: 'test',
        name: 'x',
      });
      const foreignList = await member.call('GET', `/instances/${foreign.id}/endpoints`);
      assert.deepEqual(foreignList.body, error(404, 'instance not found'));

      // Another instance of the same organization: the endpoint is not one of its endpoints.
      const other = await t.newInstance('test', 'other');
      const otherBase = `/instances/${other.id}/endpoints`;
      assert.deepEqual((await member.call('GET', otherBase)).body.data.endpoints, []);
      for (const [method, path, body] of [
        ['PATCH', `${otherBase}/${id}`, { enabled: false }],
        ['DELETE', `${otherBase}/${id}`, undefined],
        ['POST', `${otherBase}/${id}/rotate-secret`, undefined],
        ['GET', `${otherBase}/${id}/deliveries`, undefined],
        ['POST', `${otherBase}/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`, undefined],
      ] as const) {
        const response = await member.call(method, path, body);
        assert.deepEqual(response.body, error(404, 'webhook endpoint not found'), `${method} ${path}`);
      }
    });
  });
}
