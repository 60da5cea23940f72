import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { textMessage } from '../webhooks/support.ts';
import { createUser, type DashboardClient, signIn } from './support.ts';

const error = (code: number, message: string) => ({ error: { code, message } });

/** Every event type, in canonical order (written out: the test pins the list). */
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

for (const dialect of testDialects()) {
  describe(`dashboard API: keys, instances, webhook, sandbox and usage through the API's services [${dialect}]`, () => {
    let t: TestApp;
    let member: DashboardClient;
    before(async () => {
      t = await createTestApp({ dialect });
      member = await signIn(t, await createUser(t, 'member'));
    });
    after(() => t.close());

    it('creates keys with the fields checked and named; the value is in the answer only', async () => {
      const bad = [
        [{ env: 'test', scopes: ['chat:everything'] }, /^scopes: unknown scope chat:everything \(allowed: /],
        [{ env: 'test', scopes: ['chat:*'], expiresIn: '3y' }, /^expiresIn must be a duration such as 90s/],
        [{ env: 'prod', scopes: ['chat:*'] }, /^env must be one of test, live$/],
        [
          { env: 'test', scopes: ['chat:messages', 'chat:*'] },
          /^scopes: chat:\* already grants chat:messages: choose chat:\* alone or the narrower chat scopes$/,
        ],
        [{ env: 'test', scopes: [] }, /^scopes must list 1 to 10 scopes$/],
        [
          { env: 'live', scopes: ['chat:*'], instances: [t.instance.id] },
          /^instances: .* is not a live instance/,
        ],
      ] as const;
      for (const [body, message] of bad) {
        const res = await member.call('POST', '/keys', body);
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.match(res.body.error.message, message);
      }
      const made = await member.call('POST', '/keys', {
        env: 'test',
        name: 'dash',
        scopes: ['chat:messages', 'chat:webhook'],
        instances: [t.instance.id],
        expiresIn: '30d',
      });
      assert.equal(made.status, 200);
      const { key, record } = made.body.data;
      assert.equal(record.prefix, key.slice(0, 12));
      assert.equal(record.expiresAt, new Date(t.clock() + 30 * 86_400_000).toISOString());
      const listed = (await member.call('GET', '/keys')).body.data.keys;
      assert.ok(
        listed.some((k: any) => k.id === record.id && k.scopes.join() === 'chat:messages,chat:webhook'),
      );
      assert.ok(!JSON.stringify(listed).includes(key), 'the list never holds a key value');
      const use = await t.call('GET', '/v1/webhook', undefined, { authorization: `Bearer ${key}` });
      assert.equal(use.status, 200);
      const revoke = await member.call('POST', `/keys/${record.id}/revoke`);
      assert.match(revoke.body.data.key.revokedAt, /Z$/);
      const after = await t.call('GET', '/v1/webhook', undefined, { authorization: `Bearer ${key}` });
      assert.deepEqual(after.body, error(401, 'invalid API key'));
    });

    it('does not revoke another organization’s key', async () => {
      const other = await adminCreateOrg(t.testStore.store.db, { name: `other-${Date.now()}` });
      const foreign = await adminCreateKey(t.testStore.store.db, { org: other.id, env: 'test' });
      const res = await member.call('POST', `/keys/${foreign.record.id}/revoke`);
      assert.deepEqual(res.body, error(404, 'key not found'));
    });

    it('a member may not create a key with instances:manage, which deletes instances: only an owner may', async () => {
      // Deleting an instance is an owner's (docs/decisions/0022-dashboard.md); a member's key must not do it instead.
      const direct = await member.call('DELETE', `/instances/${t.instance.id}`);
      assert.deepEqual(direct.body, error(403, 'this needs the owner role (you are member)'));
      for (const scopes of [['instances:manage'], ['chat:*', 'instances:manage']]) {
        const res = await member.call('POST', '/keys', { env: 'test', scopes });
        assert.deepEqual(
          res.body,
          error(
            403,
            'scopes: instances:manage needs the owner role (you are member): a key may not do more than its creator',
          ),
        );
      }
      const keys = (await member.call('GET', '/keys')).body.data.keys;
      assert.ok(
        !keys.some((k: { scopes: string[] }) => k.scopes.includes('instances:manage')),
        'no key was made',
      );
      assert.equal(
        (await t.call('GET', `/v1/instances/${t.instance.id}`, undefined)).status,
        403,
        'chat:* only',
      );
      // An owner may, and the key does what an owner may.
      const owner = await signIn(t, await createUser(t, 'owner'));
      const made = await owner.call('POST', '/keys', { env: 'test', scopes: ['instances:manage'] });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      const spare = await t.newInstance('test', 'spare');
      const removed = await t.call('DELETE', `/v1/instances/${spare.id}`, undefined, {
        authorization: `Bearer ${made.body.data.key}`,
      });
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
    });

    it('webhook: refuses a plain-HTTP URL, sets the subscription, 404 on an unknown delivery', async () => {
      const base = `/instances/${t.instance.id}`;
      const http = await member.call('PUT', `${base}/webhook`, { webhookUrl: 'http://example.com/hook' });
      assert.deepEqual(http.body, error(400, 'webhookUrl must be an HTTPS URL'));
      const sub = await member.call('PUT', `${base}/subscribe`, { subscribe: ['ChatPresence', 'Message'] });
      assert.deepEqual(sub.body.data, { subscribe: ['Message', 'ChatPresence'] });
      const config = await member.call('GET', `${base}/webhook`);
      assert.deepEqual(config.body.data.subscribe, ['Message', 'ChatPresence']);
      assert.equal(config.body.data.hasHmacKey, false);
      assert.deepEqual(config.body.data.eventTypes, ALL_TYPES);
      // Every type parley emits can be subscribed at once, the two status events included; kept canonical.
      const all = await member.call('PUT', `${base}/subscribe`, { subscribe: [...ALL_TYPES].reverse() });
      assert.equal(all.status, 200, JSON.stringify(all.body));
      assert.deepEqual(all.body.data, { subscribe: ALL_TYPES });
      assert.deepEqual((await member.call('GET', `${base}/webhook`)).body.data.subscribe, ALL_TYPES);
      const unknownType = await member.call('PUT', `${base}/subscribe`, { subscribe: ['Typing'] });
      assert.deepEqual(
        unknownType.body,
        error(400, `subscribe contains unknown event type Typing (allowed: ${ALL_TYPES.join(', ')})`),
      );
      const none = await member.call('PUT', `${base}/subscribe`, { subscribe: [] });
      assert.deepEqual(none.body, error(400, 'subscribe must list at least one event type'));
      const redeliver = await member.call('POST', `${base}/deliveries/nope/redeliver`);
      assert.deepEqual(redeliver.body, error(404, 'delivery not found'));
      // An event id is matched as the API matches it: in any case (UUIDs are case-insensitive, RFC 9562 §4).
      await t.services.recorder.record(t.instance.id, textMessage('to redeliver'));
      const { id: eventId } = await t.testStore.store.db
        .selectFrom('webhook_events')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      // Found (the 404 above is for an event it does not have), then refused for the missing URL.
      const upper = await member.call('POST', `${base}/deliveries/${eventId.toUpperCase()}/redeliver`);
      assert.deepEqual(upper.body, error(409, 'no webhook URL configured'));
      const test = await member.call('POST', `${base}/webhook/test`);
      assert.deepEqual(test.body, error(409, 'no webhook URL configured'));
    });

    it('sandbox helpers exist only on test instances; instances are created with their name checked', async () => {
      const live = await member.call('POST', '/instances', { env: 'live', name: 'phone' });
      assert.equal(live.status, 200);
      assert.deepEqual(
        { name: live.body.data.name, env: live.body.data.env, loggedIn: live.body.data.loggedIn },
        { name: 'phone', env: 'live', loggedIn: false },
      );
      const scan = await member.call('POST', `/instances/${live.body.data.id}/sandbox/inbound`, {
        phone: '5511988887777',
        body: 'hi',
      });
      assert.equal(scan.status, 404);
      const code = await member.call('POST', `/instances/${live.body.data.id}/pairing-code`, {
        phone: '5511999990001',
      });
      assert.deepEqual(
        code.body,
        error(409, 'instance is not connected'),
        'pairing by code starts after connect',
      );
      const sandboxCode = await member.call('POST', `/instances/${t.instance.id}/pairing-code`, {
        phone: '5511999990001',
      });
      assert.equal(sandboxCode.status, 400);
      assert.match(sandboxCode.body.error.message, /^pairing by code is available on live instances only/);
      const long = await member.call('POST', '/instances', { env: 'test', name: 'x'.repeat(61) });
      assert.deepEqual(long.body, error(400, 'name must be at most 60 characters'));
      const malformed = await member.call('GET', '/instances/not-a-uuid');
      assert.deepEqual(malformed.body, error(404, 'instance not found'));
    });

    it('deletes an instance for an owner only, with its rows; 404 once gone', async () => {
      const made = await member.call('POST', '/instances', { env: 'live', name: 'short-lived' });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      const id: string = made.body.data.id;
      const refused = await member.call('DELETE', `/instances/${id}`);
      assert.deepEqual(refused.body, error(403, 'this needs the owner role (you are member)'));
      const owner = await signIn(t, await createUser(t, 'owner'));
      const deleted = await owner.call('DELETE', `/instances/${id}`);
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      assert.deepEqual(deleted.body.data, { details: 'Instance deleted', id });
      const row = await t.services.store.db
        .selectFrom('instances')
        .select('id')
        .where('id', '=', id)
        .executeTakeFirst();
      assert.equal(row, undefined);
      const again = await owner.call('DELETE', `/instances/${id}`);
      assert.deepEqual(again.body, error(404, 'instance not found'));
    });

    it('usage shows the plan and counts API requests per environment without consuming any', async () => {
      await t.call('GET', '/v1/session/status');
      await t.call('GET', '/v1/session/status');
      const first = (await member.call('GET', '/usage')).body.data;
      const again = (await member.call('GET', '/usage')).body.data;
      // `reset` counts down on the wall clock between the two reads; what is used and left must not move.
      const withoutReset = (data: unknown) =>
        JSON.parse(JSON.stringify(data), (key, value) => (key === 'reset' ? undefined : value));
      assert.deepEqual(withoutReset(first), withoutReset(again), 'reading usage consumes nothing');
      assert.equal(first.plan, 'free');
      assert.deepEqual([first.perMinute, first.perDay], [60, 1000]);
      const test = first.usage.find((u: any) => u.env === 'test');
      const live = first.usage.find((u: any) => u.env === 'live');
      const used = (w: any) => w.quota - w.remaining;
      assert.ok(used(test.windows[0]) >= 2, JSON.stringify(test));
      assert.equal(used(test.windows[0]), used(test.windows[1]));
      assert.deepEqual(live.windows.map(used), [0, 0]);
      // The plan's cap on instances per environment (docs/decisions/0029-instances-over-the-api.md), and the counts:
      // the app's test instance, and the live one an earlier test created.
      assert.equal(first.maxInstances, 2);
      assert.deepEqual([test.instances, live.instances], [1, 1]);
    });
  });
}
