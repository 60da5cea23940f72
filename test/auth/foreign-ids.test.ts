import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { type ApiResponse, createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * Ids of another organization's objects (docs/decisions/0020-security-promises.md "Tenancy", docs/decisions/0002-
 * instance-resolution.md): a key addressing its own instance, given the id of a message, an event or an instance of
 * another organization, in the path or the body, is answered as for an id that does not exist (404), never 403, and
 * nothing of the other organization changes. The same holds between the environments of one organization.
 */
const PEER = '5511988887777';

for (const dialect of testDialects()) {
  describe(`ids of another organization's objects [${dialect}]`, () => {
    let t: TestApp;
    const theirs = { key: '', instance: '', message: '', event: '' };
    let liveKey: string;

    async function as(
      key: string,
      method: 'GET' | 'POST',
      url: string,
      body?: unknown,
    ): Promise<ApiResponse> {
      return t.call(method, url, body, { authorization: `Bearer ${key}` });
    }

    before(async () => {
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      await loginSandbox(t, '5511999990001');
      const db = t.testStore.store.db;
      const other = await adminCreateOrg(db, {
        name: `other-${Math.random().toString(36).slice(2, 10)}`,
        plan: 'enterprise',
        perMinute: 1_000_000,
        perDay: 10_000_000,
      });
      theirs.instance = (await adminCreateInstance(db, { org: other.id, env: 'test', name: 'theirs' })).id;
      theirs.key = (await adminCreateKey(db, { org: other.id, env: 'test' }, t.clock())).key;
      assert.equal((await as(theirs.key, 'POST', '/v1/session/connect', {})).status, 200);
      assert.equal(
        (await as(theirs.key, 'POST', '/v1/sandbox/scan', { phone: '5511999990002' })).status,
        200,
      );
      const inbound = await as(theirs.key, 'POST', '/v1/sandbox/inbound', { phone: PEER, body: 'secret' });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      theirs.message = inbound.body.data.id;
      const events = await as(theirs.key, 'GET', '/v1/events');
      assert.equal(events.status, 200, JSON.stringify(events.body));
      theirs.event = events.body.data.events.at(-1).id;
      liveKey = await t.newKey({ env: 'live', scopes: ['chat:*', 'instances:manage'] });
    });
    after(() => t.close());

    /** Every request with one of their ids, from our key on our instance. */
    function attempts(): [string, 'GET' | 'POST', string, unknown][] {
      const m = theirs.message;
      return [
        ['message read', 'GET', `/v1/messages/${m}`, undefined],
        ['message media', 'GET', `/v1/messages/${m}/media`, undefined],
        ['message cancel', 'POST', `/v1/messages/${m}/cancel`, {}],
        ['message star', 'POST', `/v1/messages/${m}/star`, {}],
        ['message unstar', 'POST', `/v1/messages/${m}/unstar`, {}],
        ['forward', 'POST', '/v1/messages/forward', { phone: PEER, messageId: m }],
        ['delivery redeliver', 'POST', `/v1/webhook/deliveries/${theirs.event}/redeliver`, {}],
        ['instance read', 'GET', `/v1/instances/${theirs.instance}`, undefined],
      ];
    }

    it('our test key gets 404 for each of their ids', async () => {
      const manage = await t.newKey({ scopes: ['chat:*', 'instances:manage'] });
      for (const [name, method, url, body] of attempts()) {
        const answer = await as(manage, method, url, body);
        assert.equal(answer.status, 404, `${name}: ${JSON.stringify(answer.body)}`);
        assert.match(answer.body.error.message, /not found/, name);
      }
      const stored = await as(theirs.key, 'GET', `/v1/messages/${theirs.message}`);
      assert.equal(stored.status, 200, JSON.stringify(stored.body));
      assert.equal(stored.body.data.id, theirs.message, 'their message is still theirs to read');
    });

    it('a live key of our organization gets 404 for the ids of our own test instance', async () => {
      const ours = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'ours' });
      const id = ours.body.data.id;
      for (const [method, url] of [
        ['GET', `/v1/messages/${id}`],
        ['POST', `/v1/messages/${id}/star`],
        ['GET', `/v1/instances/${t.instance.id}`],
      ] as const) {
        const answer = await as(liveKey, method, url, method === 'POST' ? {} : undefined);
        assert.equal(answer.status, 404, `${method} ${url}: ${JSON.stringify(answer.body)}`);
      }
    });
  });
}
