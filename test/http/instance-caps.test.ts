import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { cli, storeEnv } from '../cli/support.ts';
import { createUser, signIn } from '../dashboard/support.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { bad, organizationOn, type PlanChoice } from './instances-support.ts';

/**
 * The plan's cap on instances (docs/decisions/0029-instances-over-the-api.md): counted per organization and
 * environment, held under concurrent creations, and the same on the API, the dashboard and the CLI.
 */

for (const dialect of testDialects()) {
  describe(`the plan's instance cap [${dialect}]`, () => {
    let t: TestApp;
    /** A test key of `t`'s free organization with `instances:manage` only. */
    let manage: string;
    const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, key = manage) =>
      t.call(method, url, body, { authorization: `Bearer ${key}` });
    const organization = (plan: PlanChoice) => organizationOn(t, plan);

    before(async () => {
      t = await createTestApp({ dialect });
      manage = await t.newKey({ scopes: ['instances:manage'] });
    });
    after(() => t.close());

    it('the plan caps instances per environment: free 2 (403 naming the limit), the other environment apart', async () => {
      const { org, key } = await organization({ plan: 'free' });
      const live = await t.newKey({ org: org.id, env: 'live', scopes: ['instances:manage'] });
      for (const name of ['a', 'b'])
        assert.equal((await call('POST', '/v1/instances', { name }, key)).status, 201);
      const third = await call('POST', '/v1/instances', { name: 'c' }, key);
      assert.equal(third.status, 403);
      assert.deepEqual(
        third.body,
        bad(403, 'the free plan allows 2 test instances; this organization has 2'),
      );
      for (const name of ['x', 'y'])
        assert.equal((await call('POST', '/v1/instances', { name }, live)).status, 201);
      assert.deepEqual(
        (await call('POST', '/v1/instances', { name: 'z' }, live)).body,
        bad(403, 'the free plan allows 2 live instances; this organization has 2'),
      );
      const rows = await t.testStore.store.db
        .selectFrom('instances')
        .select(['env', 'name'])
        .where('org_id', '=', org.id)
        .orderBy('env')
        .orderBy('name')
        .execute();
      assert.deepEqual(rows, [
        { env: 'live', name: 'x' },
        { env: 'live', name: 'y' },
        { env: 'test', name: 'a' },
        { env: 'test', name: 'b' },
      ]);
      // A deleted instance frees its place.
      const listed = (await call('GET', '/v1/instances', undefined, key)).body.data.instances;
      assert.equal((await call('DELETE', `/v1/instances/${listed[0].id}`, undefined, key)).status, 200);
      assert.equal((await call('POST', '/v1/instances', { name: 'c' }, key)).status, 201);
    });

    it('pro allows 20; enterprise its own cap, else 20; concurrent creations never pass the cap', async () => {
      const pro = await organization({ plan: 'pro' });
      const made = await Promise.all(
        Array.from({ length: 22 }, (_, i) => call('POST', '/v1/instances', { name: `p${i}` }, pro.key)),
      );
      assert.deepEqual(
        made.map((r) => r.status).sort(),
        [...Array(20).fill(201), 403, 403],
        'exactly 20 of 22 concurrent creations pass',
      );
      assert.deepEqual(
        made.find((r) => r.status === 403)?.body,
        bad(403, 'the pro plan allows 20 test instances; this organization has 20'),
      );
      const own = await organization({
        plan: 'enterprise',
        perMinute: 1000,
        perDay: 100_000,
        maxInstances: 1,
      });
      assert.equal((await call('POST', '/v1/instances', { name: 'only' }, own.key)).status, 201);
      assert.deepEqual(
        (await call('POST', '/v1/instances', { name: 'more' }, own.key)).body,
        bad(403, 'the enterprise plan allows 1 test instance; this organization has 1'),
      );
      const unset = await organization({ plan: 'enterprise', perMinute: 1000, perDay: 100_000 });
      for (let i = 0; i < 20; i++) {
        assert.equal((await call('POST', '/v1/instances', { name: `e${i}` }, unset.key)).status, 201);
      }
      assert.deepEqual(
        (await call('POST', '/v1/instances', { name: 'e20' }, unset.key)).body,
        bad(403, 'the enterprise plan allows 20 test instances; this organization has 20'),
      );
    });

    it('the dashboard and the CLI create through the same cap', async () => {
      // t's organization is free and holds `main`: one more test instance fits.
      const member = await signIn(t, await createUser(t, 'member'));
      const first = await member.call('POST', '/instances', { env: 'test', name: 'dash' });
      assert.equal(first.status, 200);
      const refused = await member.call('POST', '/instances', { env: 'test', name: 'dash2' });
      assert.deepEqual(
        refused.body,
        bad(403, 'the free plan allows 2 test instances; this organization has 2'),
      );
      const viaCli = await cli(
        storeEnv(t.testStore),
        ...['instance', 'create', '--org', t.org.name, '--env', 'test', '--json'],
      );
      assert.equal(viaCli.code, 1);
      assert.deepEqual(viaCli.json, {
        error: 'the free plan allows 2 test instances; this organization has 2',
      });
      const names = await t.testStore.store.db
        .selectFrom('instances')
        .select('name')
        .where('org_id', '=', t.org.id)
        .where('env', '=', 'test')
        .orderBy('created_at')
        .execute();
      assert.deepEqual(names, [{ name: 'main' }, { name: 'dash' }]);
      const removed = await call('DELETE', `/v1/instances/${first.body.data.id}`);
      assert.equal(removed.status, 200);
      const cliAgain = await cli(
        storeEnv(t.testStore),
        ...['instance', 'create', '--org', t.org.name, '--env', 'test', '--name', 'cli', '--json'],
      );
      assert.equal(cliAgain.code, 0, cliAgain.stdout);
      assert.equal(cliAgain.json.name, 'cli');
      assert.equal((await call('DELETE', `/v1/instances/${cliAgain.json.id}`)).status, 200);
    });
  });
}
