import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { cli, storeEnv } from '../cli/support.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`parley user create|list|remove and the dashboard sign-in [${dialect}]`, () => {
    let t: TestApp;
    let env: Record<string, string>;
    before(async () => {
      t = await createTestApp({ dialect });
      await adminCreateOrg(t.testStore.store.db, { name: 'acme' });
      env = storeEnv(t.testStore);
    });
    after(() => t.close());

    it('creates a user whose printed password signs in to the dashboard', async () => {
      const created = await cli(
        env,
        'user',
        'create',
        '--org',
        t.org.name,
        '--email',
        'Ana@Example.com',
        '--role',
        'member',
        '--json',
      );
      assert.equal(created.code, 0, created.stderr);
      assert.deepEqual(Object.keys(created.json).sort(), [
        'createdAt',
        'email',
        'id',
        'lastSignInAt',
        'orgId',
        'password',
        'role',
      ]);
      assert.equal(created.json.email, 'ana@example.com');
      assert.equal(created.json.orgId, t.org.id);
      assert.equal(created.json.role, 'member');
      const signIn = await t.app.inject({
        method: 'POST',
        url: '/dashboard/api/sign-in',
        payload: { email: 'ana@example.com', password: created.json.password },
      });
      assert.equal(signIn.statusCode, 200);
      assert.equal(signIn.json().data.user.role, 'member');
    });

    it('refuses a bad role, a taken e-mail and an unknown organization, naming the rule', async () => {
      const role = await cli(
        env,
        'user',
        'create',
        '--org',
        t.org.name,
        '--email',
        'b@example.com',
        '--role',
        'admin',
        '--json',
      );
      assert.equal(role.code, 1);
      assert.deepEqual(role.json, { error: 'role must be one of owner, member, viewer' });
      const taken = await cli(
        env,
        'user',
        'create',
        '--org',
        'acme',
        '--email',
        'ana@example.com',
        '--role',
        'viewer',
        '--json',
      );
      assert.deepEqual(taken.json, { error: 'user ana@example.com already exists' });
      const org = await cli(
        env,
        'user',
        'create',
        '--org',
        'nope',
        '--email',
        'c@example.com',
        '--role',
        'viewer',
        '--json',
      );
      assert.deepEqual(org.json, { error: 'organization "nope" not found' });
    });

    it('lists users per organization and removes one by e-mail', async () => {
      await cli(env, 'user', 'create', '--org', 'acme', '--email', 'ops@acme.example', '--role', 'owner');
      const acme = await cli(env, 'user', 'list', '--org', 'acme', '--json');
      assert.deepEqual(
        acme.json.users.map((u: any) => [u.email, u.role]),
        [['ops@acme.example', 'owner']],
      );
      const text = await cli(env, 'user', 'list', '--org', t.org.name);
      assert.match(text.stdout, /^[0-9a-f-]{36} {2}ana@example\.com {2}member {2}last sign-in \d{4}-/m);
      const last = await cli(env, 'user', 'remove', 'ops@acme.example', '--json');
      assert.deepEqual(last.json, { error: 'cannot remove the last owner of the organization' });
      const removed = await cli(env, 'user', 'remove', 'ana@example.com', '--json');
      assert.equal(removed.json.email, 'ana@example.com');
      assert.equal(removed.json.removed, true);
      const signIn = await t.app.inject({
        method: 'POST',
        url: '/dashboard/api/sign-in',
        payload: { email: 'ana@example.com', password: 'whatever it was' },
      });
      assert.equal(signIn.statusCode, 401);
    });
  });
}
