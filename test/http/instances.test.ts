import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { bad, organizationOn, type PlanChoice } from './instances-support.ts';

/**
 * `/v1/instances` (docs/api.md#instances, docs/decisions/0029-instances-over-the-api.md): create, list, read, rename
 * and delete instances in the key's organization and environment, scope `instances:manage`. The plan's cap is
 * test/http/instance-caps.test.ts; what a delete removes is test/http/instance-delete.test.ts.
 */

const NOT_FOUND = bad(404, 'instance not found');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const dialect of testDialects()) {
  describe(`instances over the API (docs/decisions/0029-instances-over-the-api.md) [${dialect}]`, () => {
    let t: TestApp;
    /** A test key of `t`'s free organization with `instances:manage` only. */
    let manage: string;
    const as = (key: string) => ({ authorization: `Bearer ${key}` });
    const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, key = manage) =>
      t.call(method, url, body, as(key));

    before(async () => {
      t = await createTestApp({ dialect });
      manage = await t.newKey({ scopes: ['instances:manage'] });
    });
    after(() => t.close());

    const organization = (plan: PlanChoice) => organizationOn(t, plan);

    it('every route needs instances:manage, which chat:* does not include (403 naming the scope)', async () => {
      const chatAll = t.key;
      const routes = [
        ['GET', '/v1/instances'],
        ['POST', '/v1/instances'],
        ['GET', `/v1/instances/${t.instance.id}`],
        ['PATCH', `/v1/instances/${t.instance.id}`],
        ['DELETE', `/v1/instances/${t.instance.id}`],
      ] as const;
      for (const [method, url] of routes) {
        const r = await call(
          method,
          url,
          method === 'POST' || method === 'PATCH' ? { name: 'x' } : undefined,
          chatAll,
        );
        assert.equal(r.status, 403, `${method} ${url}`);
        assert.deepEqual(
          r.body,
          bad(403, 'API key lacks required scope instances:manage'),
          `${method} ${url}`,
        );
      }
      // Nothing happened: the instance is there, with its name.
      const row = await t.testStore.store.db
        .selectFrom('instances')
        .select('name')
        .where('id', '=', t.instance.id)
        .executeTakeFirst();
      assert.deepEqual(row, { name: 'main' });
      // instances:manage alone reaches no chat operation.
      assert.deepEqual(
        (await call('GET', '/v1/session/status')).body,
        bad(403, 'API key lacks required scope chat:session'),
      );
    });

    it("POST creates an instance in the key's organization and environment: 201 and the stored row", async () => {
      const { org, key } = await organization({ plan: 'pro' });
      const live = await t.newKey({ org: org.id, env: 'live', scopes: ['instances:manage'] });
      const made = await call('POST', '/v1/instances', { name: '  sales  ' }, key);
      assert.equal(made.status, 201);
      assert.match(made.body.data.id, UUID);
      assert.match(made.body.data.createdAt, ISO);
      assert.deepEqual(made.body, {
        success: true,
        code: 201,
        data: {
          id: made.body.data.id,
          name: 'sales',
          env: 'test',
          phone: null,
          webhook: null,
          lastConnectedAt: null,
          createdAt: made.body.data.createdAt,
        },
      });
      const madeLive = await call('POST', '/v1/instances', { name: 'phone' }, live);
      assert.equal(madeLive.status, 201);
      assert.equal(madeLive.body.data.env, 'live');
      const rows = await t.testStore.store.db
        .selectFrom('instances')
        .select(['id', 'org_id', 'env', 'name', 'phone', 'desired_state', 'created_at'])
        .where('org_id', '=', org.id)
        .orderBy('created_at')
        .orderBy('env', 'desc')
        .execute();
      assert.deepEqual(
        rows.map((r) => ({ ...r, created_at: new Date(Number(r.created_at)).toISOString() })),
        [
          {
            id: made.body.data.id,
            org_id: org.id,
            env: 'test',
            name: 'sales',
            phone: null,
            desired_state: 'disconnected',
            created_at: made.body.data.createdAt,
          },
          {
            id: madeLive.body.data.id,
            org_id: org.id,
            env: 'live',
            name: 'phone',
            phone: null,
            desired_state: 'disconnected',
            created_at: madeLive.body.data.createdAt,
          },
        ].sort((a, b) => a.created_at.localeCompare(b.created_at) || b.env.localeCompare(a.env)),
      );
    });

    it('POST validates the name, naming the field (400), and a key limited to some instances may not create (403)', async () => {
      const { org, key } = await organization({ plan: 'pro' });
      const cases: [unknown, string][] = [
        [{}, 'name is required'],
        [{ name: '' }, 'name must not be empty'],
        [{ name: '   ' }, 'name must not be empty'],
        [{ name: 'x'.repeat(61) }, 'name must be at most 60 characters'],
        [{ name: 7 }, 'name must be a string'],
      ];
      for (const [body, message] of cases) {
        assert.deepEqual((await call('POST', '/v1/instances', body, key)).body, bad(400, message), message);
      }
      const one = await adminCreateInstance(t.testStore.store.db, { org: org.id, env: 'test', name: 'one' });
      const limited = await t.newKey({ org: org.id, scopes: ['instances:manage'], instances: [one.id] });
      assert.deepEqual(
        (await call('POST', '/v1/instances', { name: 'two' }, limited)).body,
        bad(
          403,
          'a key limited to some instances cannot create instances (the new one would be outside its list)',
        ),
      );
      const count = await t.testStore.store.db
        .selectFrom('instances')
        .select('name')
        .where('org_id', '=', org.id)
        .execute();
      assert.deepEqual(count, [{ name: 'one' }], 'no instance was created by the refused requests');
    });

    it('GET lists and reads what the key may address: its organization, its environment, its allow-list', async () => {
      const { org, key } = await organization({ plan: 'pro' });
      const db = t.testStore.store.db;
      const a = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'a' });
      const b = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'b' });
      const live = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'live' });
      const view = (i: Instance) => ({
        id: i.id,
        name: i.name,
        env: i.env,
        phone: null,
        webhook: null,
        lastConnectedAt: null,
        createdAt: i.createdAt,
      });
      assert.deepEqual((await call('GET', '/v1/instances', undefined, key)).body, {
        success: true,
        code: 200,
        // Oldest first; instances created in the same millisecond in id order.
        data: {
          instances: [view(a), view(b)].sort(
            (x, y) => x.createdAt.localeCompare(y.createdAt) || x.id.localeCompare(y.id),
          ),
        },
      });
      assert.deepEqual((await call('GET', `/v1/instances/${b.id}`, undefined, key)).body, {
        success: true,
        code: 200,
        data: view(b),
      });
      assert.deepEqual(
        (await call('GET', `/v1/instances/${b.id.toUpperCase()}`, undefined, key)).body.data,
        view(b),
        'a UUID in upper case names the same instance',
      );
      const limited = await t.newKey({ org: org.id, scopes: ['instances:manage'], instances: [b.id] });
      assert.deepEqual((await call('GET', '/v1/instances', undefined, limited)).body.data, {
        instances: [view(b)],
      });
      const liveKey = await t.newKey({ org: org.id, env: 'live', scopes: ['instances:manage'] });
      assert.deepEqual((await call('GET', '/v1/instances', undefined, liveKey)).body.data, {
        instances: [view(live)],
      });
      // 404, never 403: another environment, another organization, outside the allow-list, unknown, not a UUID.
      const misses: [string, string][] = [
        [key, live.id],
        [liveKey, a.id],
        [key, t.instance.id],
        [manage, a.id],
        [limited, a.id],
        [key, '00000000-0000-4000-8000-000000000000'],
        [key, 'not-a-uuid'],
        [key, '5511999990001'],
      ];
      for (const [k, id] of misses) {
        for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
          const r = await call(
            method,
            `/v1/instances/${id}`,
            method === 'PATCH' ? { name: 'x' } : undefined,
            k,
          );
          assert.equal(r.status, 404, `${method} ${id}`);
          assert.deepEqual(r.body, NOT_FOUND, `${method} ${id}`);
        }
      }
      const names = await db
        .selectFrom('instances')
        .select('name')
        .where('org_id', '=', org.id)
        .orderBy('name')
        .execute();
      assert.deepEqual(names, [{ name: 'a' }, { name: 'b' }, { name: 'live' }], 'nothing renamed or deleted');
    });

    it('PATCH renames (200 and the stored row) and validates the name, naming the field', async () => {
      const { org, key } = await organization({ plan: 'pro' });
      const db = t.testStore.store.db;
      const a = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'a' });
      const renamed = await call('PATCH', `/v1/instances/${a.id}`, { name: ' support ' }, key);
      assert.deepEqual(renamed.body, {
        success: true,
        code: 200,
        data: {
          id: a.id,
          name: 'support',
          env: 'test',
          phone: null,
          webhook: null,
          lastConnectedAt: null,
          createdAt: a.createdAt,
        },
      });
      const row = await db.selectFrom('instances').select('name').where('id', '=', a.id).executeTakeFirst();
      assert.deepEqual(row, { name: 'support' });
      const cases: [unknown, string][] = [
        [{}, 'name is required'],
        [{ name: '' }, 'name must not be empty'],
        [{ name: ' \t ' }, 'name must not be empty'],
        [{ name: 'é'.repeat(61) }, 'name must be at most 60 characters'],
        [{ name: null }, 'name must be a string'],
      ];
      for (const [body, message] of cases) {
        const r = await call('PATCH', `/v1/instances/${a.id}`, body, key);
        assert.equal(r.status, 400, message);
        assert.deepEqual(r.body, bad(400, message));
      }
      assert.equal((await call('PATCH', `/v1/instances/${a.id}`, { name: 'é'.repeat(60) }, key)).status, 200);
    });

    it('POST takes Idempotency-Key: a retry gets the kept 201 and creates nothing', async () => {
      const { org, key } = await organization({ plan: 'pro' });
      const headers = { ...as(key), 'idempotency-key': 'create-sales-1' };
      const first = await t.call('POST', '/v1/instances', { name: 'sales' }, headers);
      const again = await t.call('POST', '/v1/instances', { name: 'sales' }, headers);
      assert.equal(first.status, 201);
      assert.equal(again.status, 201);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.raw.body, first.raw.body);
      const other = await t.call('POST', '/v1/instances', { name: 'sales 2' }, headers);
      assert.deepEqual(other.body, bad(422, 'Idempotency-Key reused with a different request'));
      const rows = await t.testStore.store.db
        .selectFrom('instances')
        .select('id')
        .where('org_id', '=', org.id)
        .execute();
      assert.deepEqual(rows, [{ id: first.body.data.id }]);
    });
  });
}
