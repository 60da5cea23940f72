import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser, type DashboardClient, signIn } from '../dashboard/support.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

/**
 * Inputs found by probing every operation of /openapi.json with malformed values
 * (docs/decisions/0075-no-nul-characters.md): each must be a 400 naming the field and the rule
 * (docs/decisions/0001-envelope-and-error-codes.md), on every store, never a 500.
 */
for (const dialect of testDialects()) {
  describe(`input edges answer 400 naming the field, never 500 [${dialect}]`, () => {
    let t: TestApp;
    let owner: DashboardClient;
    let manageKey: string;

    before(async () => {
      t = await createTestApp({ dialect, env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' } });
      await loginSandbox(t);
      owner = await signIn(t, await createUser(t, 'owner'));
      manageKey = await t.newKey({ scopes: ['instances:manage'] });
    });
    after(() => t.close());

    const nul = 'a\u0000b';

    it('U+0000 in a body string is refused naming the field (PostgreSQL text cannot hold it)', async () => {
      const cases: [string, string, unknown, string, Record<string, string>?][] = [
        ['POST', '/v1/calls/settings', { autoReject: true, message: nul }, 'message'],
        [
          'POST',
          '/v1/webhooks',
          { url: 'https://127.0.0.1:9/x', events: ['Message'], description: nul },
          'description',
        ],
        ['POST', '/v1/messages/edit', { phone: '5511988887777', id: nul, body: 'x' }, 'id'],
        ['POST', '/v1/messages/read', { phone: '5511988887777', id: ['ok', nul] }, 'id[1]'],
        ['POST', '/v1/instances', { name: nul }, 'name', { authorization: `Bearer ${manageKey}` }],
      ];
      for (const [method, url, body, field, headers] of cases) {
        const res = await t.call(method as 'POST', url, body, headers);
        assert.deepEqual(
          res.body,
          { error: { code: 400, message: `${field} must not contain the NUL character (U+0000)` } },
          `${method} ${url}`,
        );
      }
      const { data } = (await t.call('GET', '/v1/webhooks')).body;
      assert.deepEqual(data.endpoints ?? data.webhooks ?? [], [], 'the refused endpoint was not created');
    });

    it('U+0000 (%00) in a path parameter or the query is refused naming it', async () => {
      for (const url of ['/v1/messages/a%00b', '/v1/webhooks/a%00b', '/v1/messages/a%00b/media']) {
        const res = await t.call('GET', url);
        assert.deepEqual(
          res.body,
          { error: { code: 400, message: 'id must not contain the NUL character (U+0000)' } },
          url,
        );
      }
      const res = await t.call('GET', `/v1/contacts/lid?lid=1%00`);
      assert.deepEqual(res.body, {
        error: { code: 400, message: 'lid must not contain the NUL character (U+0000)' },
      });
    });

    it('an integer query value past every number (1e999, Infinity) is the 400 of a value past its bound', async () => {
      const created = await t.call('POST', '/v1/webhooks', {
        url: 'https://127.0.0.1:9/x',
        events: ['Message'],
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const endpoint: string = created.body.data.id;
      const dashboard = `/instances/${t.instance.id}`;
      const known = { id: endpoint, jid: '5511988887777@s.whatsapp.net' };
      // Every integer query parameter of /openapi.json, and the dashboard's reads taking the same queries.
      const cases: {
        call: (url: string) => Promise<{ status: number; body: unknown }>;
        path: string;
        name: string;
      }[] = [];
      const doc = (await t.app.inject({ url: '/openapi.json' })).json();
      for (const [path, operations] of Object.entries<Record<string, any>>(doc.paths)) {
        for (const operation of Object.values(operations)) {
          for (const parameter of operation.parameters ?? []) {
            if (parameter.in !== 'query' || !['integer', 'number'].includes(parameter.schema?.type)) continue;
            const url = path.replace(/\{(\w+)\}/g, (_, name: 'id' | 'jid') =>
              encodeURIComponent(known[name]),
            );
            cases.push({ call: (query) => t.call('GET', `${url}?${query}`), path, name: parameter.name });
          }
        }
      }
      assert.ok(cases.length >= 7, `${cases.length} integer query parameters in /openapi.json`);
      for (const [path, names] of [
        [`${dashboard}/deliveries`, ['limit']],
        [`${dashboard}/event-log`, ['after', 'limit']],
        [`${dashboard}/endpoints/${endpoint}/deliveries`, ['limit']],
        [`${dashboard}/chats`, ['limit']],
        [`${dashboard}/chats/${encodeURIComponent(known.jid)}/messages`, ['limit']],
      ] as const) {
        for (const name of names)
          cases.push({ call: (query) => owner.call('GET', `${path}?${query}`), path, name });
      }
      const wrong: string[] = [];
      for (const { call, path, name } of cases) {
        // The answer to a finite value past each bound: a 400 naming the field.
        const above = await call(`${name}=${2n ** 64n}`);
        const below = await call(`${name}=-1`);
        for (const [res, bound] of [
          [above, 'maximum'],
          [below, 'minimum'],
        ] as const) {
          if (res.status !== 400 || !String((res.body as any)?.error?.message).startsWith(`${name} `)) {
            wrong.push(`${path} ${name} past its ${bound}: ${res.status} ${JSON.stringify(res.body)}`);
          }
        }
        for (const [value, same] of [
          ['1e999', above],
          ['Infinity', above],
          ['-1e999', below],
          ['-Infinity', below],
        ] as const) {
          const res = await call(`${name}=${value}`);
          if (res.status !== 400 || JSON.stringify(res.body) !== JSON.stringify(same.body)) {
            wrong.push(`${path} ${name}=${value}: ${res.status} ${JSON.stringify(res.body)}`);
          }
        }
      }
      assert.deepEqual(wrong, []);
    });

    it('dashboard: a key name holding U+0000 is refused, and no key is created', async () => {
      const before = (await owner.call('GET', '/keys')).body.data.keys.length;
      const res = await owner.call('POST', '/keys', { env: 'test', scopes: ['chat:*'], name: nul });
      assert.deepEqual(res.body, {
        error: { code: 400, message: 'name must not contain the NUL character (U+0000)' },
      });
      assert.equal((await owner.call('GET', '/keys')).body.data.keys.length, before);
    });

    it('dashboard: an expiresIn past the year 9999 is a 400 naming expiresIn, not a 500', async () => {
      for (const expiresIn of ['99999999999d', '9999999999h']) {
        const res = await owner.call('POST', '/keys', { env: 'test', scopes: ['chat:*'], expiresIn });
        assert.deepEqual(
          res.body,
          { error: { code: 400, message: `expiresIn must end by the year 9999 (got "${expiresIn}")` } },
          expiresIn,
        );
      }
      const ok = await owner.call('POST', '/keys', { env: 'test', scopes: ['chat:*'], expiresIn: '36500d' });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.match(ok.body.data.record.expiresAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    });
  });
}
