import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { adminCreateUser } from '../../src/app/users.ts';
import type { RouteEntry } from '../../src/http/app.ts';
import { getInstance } from '../../src/store/instances.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, type DashboardClient, PASSWORD, signIn } from './support.ts';

/**
 * The dashboard's own route suite (docs/decisions/0022-dashboard.md, docs/decisions/0020-security-promises.md), the
 * twin of test/auth/auth-suite.test.ts for the session cookie: every `/dashboard/api` route is read from the app's
 * route table, so a new one is covered the moment it is registered. Every route but sign-in declares a role; without
 * a session each answers 401, a state change without the session's CSRF token 403; and every route naming an
 * instance, a key or a user answers 404 for another organization's, changing nothing of it.
 */
const ZERO = '00000000-0000-4000-8000-000000000000';
const error = (code: number, message: string) => ({ error: { code, message } });
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

for (const dialect of testDialects()) {
  describe(`dashboard route suite: every /dashboard/api route [${dialect}]`, () => {
    let t: TestApp;
    let owner: DashboardClient;
    const foreign = { org: '', test: '', live: '', key: '', keyValue: '', user: '' };

    before(async () => {
      t = await createTestApp({ dialect, plan: { plan: 'pro' } });
      owner = await signIn(t, await createUser(t, 'owner'));
      const db = t.testStore.store.db;
      const other = await adminCreateOrg(db, { name: `other-${Math.random().toString(36).slice(2, 10)}` });
      foreign.org = other.id;
      foreign.test = (await adminCreateInstance(db, { org: other.id, env: 'test', name: 'theirs' })).id;
      foreign.live = (await adminCreateInstance(db, { org: other.id, env: 'live', name: 'theirs-live' })).id;
      const key = await adminCreateKey(db, { org: other.id, env: 'test' }, t.clock());
      foreign.key = key.record.id;
      foreign.keyValue = key.key;
      const user = await adminCreateUser(db, {
        org: other.id,
        email: `theirs-${Math.random().toString(36).slice(2, 8)}@example.com`,
        role: 'owner',
        password: PASSWORD,
      });
      foreign.user = user.user.id;
    });
    after(() => t.close());

    function dashboardRoutes(): RouteEntry[] {
      const routes = t.app.routeTable.filter((r) => r.url.startsWith('/dashboard/api/'));
      assert.ok(routes.length >= 40, `expected the dashboard API in the table, found ${routes.length}`);
      return routes;
    }

    /** `url` with `:id` as `id` and every other parameter a value that names nothing. */
    function concrete(url: string, id = ZERO): string {
      return url
        .replace(':id', id)
        .replace(':jid', '5511999990001')
        .replace(/:(endpointId|messageId)/g, ZERO)
        .replace(':eventId', ZERO);
    }

    /** A body each state-changing instance route accepts, so the instance's resolution decides its answer. */
    const VALID_BODIES: Record<string, unknown> = {
      'POST /dashboard/api/instances/:id/block': { phone: '5511999990001' },
      'POST /dashboard/api/instances/:id/unblock': { phone: '5511999990001' },
      'POST /dashboard/api/instances/:id/chats/:jid/reply': { body: 'hi' },
      'POST /dashboard/api/instances/:id/endpoints': { url: 'https://example.com/hook', events: ['Message'] },
      'POST /dashboard/api/instances/:id/pairing-code': { phone: '5511999990001' },
      'POST /dashboard/api/instances/:id/sandbox/inbound': { phone: '5511999990001', body: 'hi' },
      'POST /dashboard/api/instances/:id/sandbox/presence': { phone: '5511999990001', state: 'composing' },
      'POST /dashboard/api/instances/:id/sandbox/receipt': { id: ZERO, state: 'read' },
      'PUT /dashboard/api/instances/:id/hmac': { hmacKey: 'a-hmac-key-of-enough-length-0123456789' },
      'PUT /dashboard/api/instances/:id/subscribe': { subscribe: ['Message'] },
      'PUT /dashboard/api/instances/:id/webhook': { webhookUrl: 'https://example.com/hook' },
    };

    async function raw(method: string, url: string, headers: Record<string, string>) {
      const res = await t.app.inject({
        method: method as 'GET',
        url,
        headers,
        payload: SAFE.has(method) ? undefined : {},
      });
      return { status: res.statusCode, body: res.json() };
    }

    it('every route but sign-in declares a role', () => {
      const open = dashboardRoutes()
        .filter((r) => r.dashboard === undefined || r.dashboard === 'public')
        .map((r) => `${r.method} ${r.url} ${r.dashboard}`);
      assert.deepEqual(open, ['POST /dashboard/api/sign-in public']);
    });

    it('401 sign in to continue without a session cookie, and with an API key instead of one', async () => {
      for (const route of dashboardRoutes()) {
        if (route.dashboard === 'public') continue;
        const refused: Record<string, string>[] = [
          {},
          { authorization: `Bearer ${t.key}` },
          { cookie: 'parley_session=forged' },
        ];
        for (const headers of refused) {
          const { status, body } = await raw(route.method, concrete(route.url), headers);
          assert.equal(status, 401, `${route.method} ${route.url} ${JSON.stringify(headers)}`);
          assert.deepEqual(body, error(401, 'sign in to continue'), `${route.method} ${route.url}`);
        }
      }
    });

    it('403 without the CSRF token, or with a wrong one, on every state change', async () => {
      for (const route of dashboardRoutes()) {
        if (route.dashboard === 'public' || SAFE.has(route.method)) continue;
        for (const csrf of [false, `${owner.csrf.slice(0, -1)}x`] as const) {
          const res = await owner.call(
            route.method as 'POST',
            concrete(route.url).replace('/dashboard/api', ''),
            {},
            { csrf },
          );
          assert.equal(res.status, 403, `${route.method} ${route.url}`);
          assert.deepEqual(
            res.body,
            error(403, 'missing or invalid CSRF token'),
            `${route.method} ${route.url}`,
          );
        }
      }
    });

    it("another organization's instances, test and live, are not found on every instance route", async () => {
      const routes = dashboardRoutes().filter((r) => r.url.startsWith('/dashboard/api/instances/:id'));
      assert.ok(routes.length >= 30, `found ${routes.length} instance routes`);
      for (const id of [foreign.test, foreign.live]) {
        for (const route of routes) {
          const body = VALID_BODIES[`${route.method} ${route.url}`] ?? {};
          const res = await owner.call(
            route.method as 'GET',
            concrete(route.url, id).replace('/dashboard/api', ''),
            body,
          );
          assert.equal(res.status, 404, `${route.method} ${route.url}: ${JSON.stringify(res.body)}`);
          assert.deepEqual(res.body, error(404, 'instance not found'), `${route.method} ${route.url}`);
        }
      }
      const db = t.testStore.store.db;
      assert.ok(await getInstance(db, foreign.test), 'their test instance is still there');
      assert.ok(await getInstance(db, foreign.live), 'their live instance is still there');
    });

    it("another organization's key and user are not found, and stay as they were", async () => {
      const revoke = await owner.call('POST', `/keys/${foreign.key}/revoke`, {});
      assert.deepEqual(revoke.body, error(404, 'key not found'));
      const role = await owner.call('PUT', `/users/${foreign.user}/role`, { role: 'viewer' });
      assert.equal(role.status, 404, JSON.stringify(role.body));
      const remove = await owner.call('DELETE', `/users/${foreign.user}`);
      assert.equal(remove.status, 404, JSON.stringify(remove.body));
      const theirs = await t.call('GET', '/v1/webhook', undefined, {
        authorization: `Bearer ${foreign.keyValue}`,
        'x-instance-id': foreign.test,
      });
      assert.equal(theirs.status, 200, 'their key still works');
      const row = await t.testStore.store.db
        .selectFrom('dashboard_users')
        .select('role')
        .where('id', '=', foreign.user)
        .executeTakeFirstOrThrow();
      assert.equal(row.role, 'owner');
    });
  });
}
