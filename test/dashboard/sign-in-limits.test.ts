import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createUser, PASSWORD } from './support.ts';

/** Sign-in limiter stores: in-process always, Redis when TEST_REDIS_URL is set (the runner says when not). */
const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

for (const store of stores) {
  describe(`dashboard sign-in limits per account and per address [${store.name}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ env: store.env });
    });
    after(() => t.close());

    const signIn = (email: string, password: string, remoteAddress: string) =>
      t.app.inject({
        method: 'POST',
        url: '/dashboard/api/sign-in',
        payload: { email, password },
        remoteAddress,
      });

    it('locks an account after 5 failures, from any address; other accounts still sign in', async () => {
      const locked = await createUser(t, 'member');
      const other = await createUser(t, 'member');
      for (let i = 0; i < 5; i += 1)
        assert.equal((await signIn(locked, 'wrong password', `192.0.2.${i}`)).statusCode, 401);
      const refused = await signIn(locked, PASSWORD, '192.0.2.99');
      assert.equal(refused.statusCode, 429);
      assert.equal(refused.json().error.message, 'too many failed sign-ins: try again later');
      assert.equal((await signIn(other, PASSWORD, '192.0.2.99')).statusCode, 200);
    });

    it('a success clears the account’s failures', async () => {
      const email = await createUser(t, 'viewer');
      for (let i = 0; i < 4; i += 1)
        assert.equal((await signIn(email, 'wrong password', '192.0.2.50')).statusCode, 401);
      assert.equal((await signIn(email, PASSWORD, '192.0.2.50')).statusCode, 200);
      for (let i = 0; i < 4; i += 1)
        assert.equal((await signIn(email, 'wrong password', '192.0.2.50')).statusCode, 401);
      assert.equal(
        (await signIn(email, PASSWORD, '192.0.2.50')).statusCode,
        200,
        'four fresh failures do not lock',
      );
    });

    it('blocks an address after 30 failures across accounts, even for a right password', async () => {
      const address = `198.51.100.${Math.floor(Math.random() * 200) + 1}`;
      for (let i = 0; i < 30; i += 1) {
        const res = await signIn(`nobody-${i}-${address}@example.com`, 'wrong password', address);
        assert.equal(res.statusCode, 401);
      }
      const email = await createUser(t, 'owner');
      const blocked = await signIn(email, PASSWORD, address);
      assert.equal(blocked.statusCode, 429);
      assert.ok(blocked.json().error.retryAfter >= 1);
      assert.equal(
        (await signIn(email, PASSWORD, '203.0.113.9')).statusCode,
        200,
        'another address signs in',
      );
    });
  });
}
