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
