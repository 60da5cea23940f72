import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Scope } from '../../src/domain/scope.ts';
import { generateApiKey, hashApiKey } from '../../src/security/api-keys.ts';
import { insertApiKey, revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, type TestApp } from '../support/app.ts';

/**
 * The shared auth suite (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0020-security-promises.md): every
 * route that declares a scope is called with each kind of bad credential and must answer exactly 401
 * `invalid API key`; with a key lacking its scope, 403 naming it; with a live key aimed at a test instance, never a
 * success. Routes are read from the app's own route table, so a new route is covered the moment it is registered.
 */
describe('shared auth suite: every authenticated route', () => {
  let t: TestApp;
  const keys: Record<string, string> = {};

  before(async () => {
    // Plan pro: the suite calls every route several times within one (manual-clock) minute, more than free's 60.
    t = await createTestApp({ plan: { plan: 'pro' } });
    const db = t.testStore.store.db;
    keys.revoked = await t.newKey();
    const revokedRow = await db
      .selectFrom('api_keys')
      .select('id')
      .where('key_hash', '=', hashApiKey(keys.revoked))
      .executeTakeFirstOrThrow();
    await revokeApiKey(db, revokedRow.id);
    const expired = generateApiKey('test');
    await insertApiKey(db, {
      orgId: t.org.id,
      env: 'test',
      name: 'expired',
      prefix: expired.prefix,
      keyHash: expired.hash,
      scopes: ['chat:*'],
      instanceIds: [],
      expiresAt: new Date(t.clock() - 1000).toISOString(),
    });
    keys.expired = expired.key;
    // Every scope, so the environment alone decides.
    keys.live = await t.newKey({ env: 'live', scopes: ['chat:*', 'instances:manage'] });
    keys.unknown = generateApiKey('test').key;
    const good = generateApiKey('test').key;
    const last = good.at(-1) === 'A' ? 'B' : 'A';
    keys.badChecksum = good.slice(0, -1) + last;
  });
  after(() => t.close());

  function authenticated() {
    const routes = t.app.routeTable.filter((r) => r.scope !== undefined && r.scope !== 'public');
    assert.ok(routes.length >= 9, `expected the API's routes in the table, found ${routes.length}`);
    return routes;
  }

  function concrete(url: string): string {
    return url.replace(/:[A-Za-z]+/g, '00000000-0000-4000-8000-000000000000');
  }

  async function call(method: string, url: string, authorization?: string) {
    const response = await t.app.inject({
      method: method as 'GET',
      url: concrete(url),
      headers: { ...(authorization === undefined ? {} : { authorization }), 'x-instance-id': t.instance.id },
    });
    return { status: response.statusCode, body: response.json() };
  }

  it('every /v1 route and every gateway route requires a scope', () => {
    const open = t.app.routeTable.filter(
      (r) =>
        (r.scope === undefined || r.scope === 'public') &&
        !/^\/(healthz|readyz|metrics|openapi\.json|docs|dashboard)/.test(r.url) &&
        r.url !== '/',
    );
    // The dashboard's routes (and `/`, which redirects to it) use the session cookie instead of an API key.
    assert.deepEqual(open, [], 'routes without a scope must be operations or dashboard endpoints only');
  });

  it('the event log and the event stream are authenticated routes of scope chat:webhook, with no gateway path', () => {
    const events = authenticated().filter((r) => /^\/(v1\/)?events/.test(r.url));
    assert.deepEqual(
      events.map((r) => [r.method, r.url, r.scope]),
      [
        ['GET', '/v1/events', 'chat:webhook'],
        // Called here as plain HTTP (app.inject cannot upgrade): its answers below are those of any request, before
        // the stream would start. The WebSocket upgrade and server-sent events forms are checked on a listening
        // server in test/events/event-stream.test.ts.
        ['GET', '/v1/events/stream', 'chat:webhook'],
      ],
    );
  });

  it('the webhook endpoints are authenticated routes of scope chat:webhook (docs/decisions/0035-webhook-endpoints.md)', () => {
    const routes = authenticated().filter((r) => /^\/v1\/webhooks(\/|$)/.test(r.url));
    assert.deepEqual(routes.map((r) => [r.method, r.url, r.scope]).sort(), [
      ['DELETE', '/v1/webhooks/:id', 'chat:webhook'],
      ['GET', '/v1/webhooks', 'chat:webhook'],
      ['GET', '/v1/webhooks/:id', 'chat:webhook'],
      ['GET', '/v1/webhooks/:id/deliveries', 'chat:webhook'],
      ['PATCH', '/v1/webhooks/:id', 'chat:webhook'],
      ['POST', '/v1/webhooks', 'chat:webhook'],
      ['POST', '/v1/webhooks/:id/deliveries/:eventId/redeliver', 'chat:webhook'],
      ['POST', '/v1/webhooks/:id/rotate-secret', 'chat:webhook'],
    ]);
  });

  it('every authenticated route is described in /openapi.json under its exact path', async () => {
    const doc = (await t.app.inject({ url: '/openapi.json' })).json();
    const undocumented = authenticated()
      .filter((r) => !doc.paths[r.url.replace(/:(\w+)/g, '{$1}')]?.[r.method.toLowerCase()])
      .map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(undocumented, []);
  });

  const cases: [string, (k: Record<string, string>) => string | undefined][] = [
    ['missing Authorization header', () => undefined],
    ['not a Bearer header', (k) => `Basic ${k.unknown}`],
    ['malformed key', () => 'Bearer svc_test_tooshort'],
    ['unknown prefix', (k) => `Bearer ${(k.unknown ?? '').replace('svc_test_', 'svc_prod_')}`],
    ['bad checksum', (k) => `Bearer ${k.badChecksum}`],
    ['unknown key', (k) => `Bearer ${k.unknown}`],
    ['revoked key', (k) => `Bearer ${k.revoked}`],
    ['expired key', (k) => `Bearer ${k.expired}`],
  ];
  for (const [name, header] of cases) {
    it(`401 invalid API key: ${name}`, async () => {
      for (const route of authenticated()) {
        const { status, body } = await call(route.method, route.url, header(keys));
        assert.equal(status, 401, `${route.method} ${route.url}`);
        assert.deepEqual(
          body,
          { error: { code: 401, message: 'invalid API key' } },
          `${route.method} ${route.url}`,
        );
      }
    });
  }

  it('chat:* grants every chat: scope and not instances:manage (docs/decisions/0029-instances-over-the-api.md)', async () => {
    const chatAll = await t.newKey({ scopes: ['chat:*'] });
    for (const route of authenticated()) {
      const { status, body } = await call(route.method, route.url, `Bearer ${chatAll}`);
      if (route.scope === 'instances:manage') {
        assert.deepEqual(body, {
          error: { code: 403, message: 'API key lacks required scope instances:manage' },
        });
      } else {
        assert.ok(status !== 401 && status !== 403, `${route.method} ${route.url} answered ${status}`);
      }
    }
  });

  it('403 naming the scope when the key lacks it', async () => {
    const scopes: Scope[] = [
      'chat:messages',
      'chat:contacts',
      'chat:session',
      'chat:groups',
      'chat:webhook',
      'instances:manage',
    ];
    const keyFor = new Map<Scope, string>();
    for (const scope of scopes)
      keyFor.set(scope, await t.newKey({ scopes: [scopes.find((s) => s !== scope) ?? scope] }));
    for (const route of authenticated()) {
      const scope = route.scope as Scope;
      const key = keyFor.get(scope);
      assert.ok(key, `route ${route.url} has unknown scope ${scope}`);
      const { status, body } = await call(route.method, route.url, `Bearer ${key}`);
      assert.equal(status, 403, `${route.method} ${route.url}`);
      assert.deepEqual(body, { error: { code: 403, message: `API key lacks required scope ${scope}` } });
    }
  });

  it('a key of the other environment never reaches a test instance', async () => {
    for (const route of authenticated()) {
      // A route naming the instance in its path is aimed at the test instance itself.
      const url = route.url.replace('/v1/instances/:id', `/v1/instances/${t.instance.id}`);
      const { status, body } = await call(route.method, url, `Bearer ${keys.live}`);
      if (route.method === 'GET' && route.url === '/v1/instances') {
        // The one listing of instances (docs/decisions/0029-instances-over-the-api.md): the live key's own, empty.
        assert.deepEqual(body, { success: true, code: 200, data: { instances: [] } }, route.url);
        continue;
      }
      // Validation (400) precedes instance resolution (docs/decisions/0024-engines-and-data-flow.md); past it, the
      // answer is 404, never success.
      assert.ok(status === 404 || status === 400, `${route.method} ${route.url} answered ${status}`);
      if (status === 404 && route.testOnly) {
        assert.equal(body.error.message, 'sandbox helpers exist only for svc_test_ keys');
      } else if (status === 404) {
        assert.match(body.error.message, /not found/);
      }
    }
  });

  it('the right scope passes authentication on every route', async () => {
    const scoped = new Map<string, string>();
    for (const route of authenticated()) {
      const scope = route.scope as string;
      if (!scoped.has(scope)) scoped.set(scope, await t.newKey({ scopes: [scope] }));
      const { status } = await call(route.method, route.url, `Bearer ${scoped.get(scope)}`);
      assert.ok(status !== 401 && status !== 403, `${route.method} ${route.url} answered ${status}`);
    }
  });

  it('the LID lookup is an authenticated route of scope chat:contacts (docs/decisions/0038-lid-mappings.md)', () => {
    const routes = authenticated().filter((r) => r.url === '/v1/contacts/lid');
    assert.deepEqual(
      routes.map((r) => [r.method, r.url, r.scope]),
      [['GET', '/v1/contacts/lid', 'chat:contacts']],
    );
  });
});
