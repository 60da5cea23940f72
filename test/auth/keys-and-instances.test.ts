import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

for (const dialect of testDialects()) {
  describe(`API keys (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0020-security-promises.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      // Limits no test here reaches: the revocation test polls until the poll interval has passed, as many requests
      // as the machine's speed allows, and those must not use up a free plan's 60 a minute for the tests after it.
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
    });
    after(() => t.close());

    it('a key revoked by another process stops working without a restart', async () => {
      const key = await t.newKey();
      const headers = { authorization: `Bearer ${key}` };
      assert.equal((await t.call('GET', '/v1/session/status', undefined, headers)).status, 200, 'cached now');
      const db = t.testStore.store.db;
      const row = await db
        .selectFrom('api_keys')
        .select('id')
        .where('key_hash', '=', hashApiKey(key))
        .executeTakeFirstOrThrow();
      // As `parley key revoke` does from its own process: only the row changes.
      await revokeApiKey(db, row.id, new Date().toISOString());
      await until(
        async () => (await t.call('GET', '/v1/session/status', undefined, headers)).status === 401,
        'revocation',
      );
      const r = await t.call('GET', '/v1/session/status', undefined, headers);
      assert.deepEqual(r.body, { error: { code: 401, message: 'invalid API key' } });
    });

    it('records when a key was last used', async () => {
      const key = await t.newKey();
      await t.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${key}` });
      const db = t.testStore.store.db;
      await until(async () => {
        const row = await db
          .selectFrom('api_keys')
          .select('last_used_at')
          .where('key_hash', '=', hashApiKey(key))
          .executeTakeFirst();
        return Number(row?.last_used_at) === t.clock();
      }, 'last_used_at');
    });

    it('an expiring key works until its expiry and then answers 401', async () => {
      const key = await t.newKey({ expiresIn: '90s' });
      const headers = { authorization: `Bearer ${key}` };
      assert.equal((await t.call('GET', '/v1/session/status', undefined, headers)).status, 200);
      t.clock.advance(91_000);
      assert.equal((await t.call('GET', '/v1/session/status', undefined, headers)).status, 401);
    });

    it('the stored row holds only the SHA-256 and the first 12 characters', async () => {
      const key = await t.newKey();
      const row = await t.testStore.store.db
        .selectFrom('api_keys')
        .selectAll()
        .where('key_hash', '=', hashApiKey(key))
        .executeTakeFirstOrThrow();
      assert.equal(row.prefix, key.slice(0, 12));
      assert.ok(!JSON.stringify(row).includes(key.slice(12)), 'no secret part stored');
    });
  });

  describe(`instance resolution (docs/decisions/0002-instance-resolution.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      // Three or more test instances: the pro plan (free allows 2, docs/decisions/0029-instances-over-the-api.md).
      t = await createTestApp({ dialect, plan: { plan: 'pro' } });
    });
    after(() => t.close());

    it('uses the only instance, refuses ambiguity, then picks the most recently connected', async () => {
      const only = await t.call('GET', '/v1/session/status');
      assert.equal(only.body.data.instanceId, t.instance.id);
      const second = await t.newInstance('test', 'second');
      assert.deepEqual((await t.call('GET', '/v1/session/status')).body, {
        error: { code: 400, message: 'several instances: name one with from' },
      });
      await loginSandbox(t, '5511999990101', t.instance.id);
      t.clock.advance(1000);
      await loginSandbox(t, '5511999990102', second.id);
      assert.equal(
        (await t.call('GET', '/v1/session/status')).body.data.instanceId,
        second.id,
        'most recent',
      );
      t.clock.advance(1000);
      await t.call('POST', `/v1/session/disconnect?from=${t.instance.id}`);
      await t.call('POST', `/v1/session/connect?from=${t.instance.id}`);
      assert.equal(
        (await t.call('GET', '/v1/session/status')).body.data.instanceId,
        t.instance.id,
        'reconnected last',
      );
    });

    it('accepts the UUID or the linked phone, by query or x-instance-id; unknown is 404', async () => {
      const byPhone = await t.call('GET', '/v1/session/status?from=5511999990102');
      assert.equal(byPhone.body.data.jid, '5511999990102.0:1@s.whatsapp.net');
      const byHeader = await t.call('GET', '/v1/session/status', undefined, {
        'x-instance-id': t.instance.id,
      });
      assert.equal(byHeader.body.data.instanceId, t.instance.id);
      for (const from of ['00000000-0000-4000-8000-000000000000', '5511000000000', 'nonsense']) {
        assert.deepEqual((await t.call('GET', `/v1/session/status?from=${from}`)).body, {
          error: { code: 404, message: 'instance not found' },
        });
      }
    });

    it('a key limited to some instances cannot address the others (404, not 403)', async () => {
      const third = await t.newInstance('test', 'third');
      const key = await t.newKey({ instances: [third.id] });
      const headers = { authorization: `Bearer ${key}` };
      assert.equal(
        (await t.call('GET', '/v1/session/status', undefined, headers)).body.data.instanceId,
        third.id,
      );
      assert.deepEqual(
        (await t.call('GET', `/v1/session/status?from=${t.instance.id}`, undefined, headers)).body,
        {
          error: { code: 404, message: 'instance not found' },
        },
      );
    });

    it("another organization's instance does not exist for this key", async () => {
      const other = await createTestApp({ dialect, testStore: t.testStore, clock: t.clock });
      try {
        assert.deepEqual((await other.call('GET', `/v1/session/status?from=${t.instance.id}`)).body, {
          error: { code: 404, message: 'instance not found' },
        });
        assert.equal((await other.call('POST', `/v1/sandbox/scan?from=${t.instance.id}`, {})).status, 404);
        // A phone linked in another organization is neither revealed nor blocked
        // (docs/decisions/0020-security-promises.md).
        await other.call('POST', '/v1/session/connect');
        const scan = await other.call('POST', '/v1/sandbox/scan', { phone: '5511999990101' });
        assert.equal(scan.status, 200);
      } finally {
        await other.close();
      }
    });

    it('a live key gets 404 from the sandbox helpers', async () => {
      const live = await t.newKey({ env: 'live' });
      await t.newInstance('live', 'live');
      const r = await t.call('POST', '/v1/sandbox/scan', {}, { authorization: `Bearer ${live}` });
      assert.deepEqual(r.body, {
        error: { code: 404, message: 'sandbox helpers exist only for svc_test_ keys' },
      });
    });

    it('a sandbox scan refuses a phone already linked to another instance', async () => {
      const fourth = await t.newInstance('test', 'fourth');
      await t.call('POST', `/v1/session/connect?from=${fourth.id}`);
      const r = await t.call('POST', `/v1/sandbox/scan?from=${fourth.id}`, { phone: '5511999990101' });
      assert.deepEqual(r.body, {
        error: { code: 409, message: 'phone 5511999990101 is already linked to another instance' },
      });
    });
  });
}
