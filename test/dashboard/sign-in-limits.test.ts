import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createUser, PASSWORD } from './support.ts';

/** Sign-in limiter stores: in-process always, Redis when TEST_REDIS_URL is set (the runner says when not). */
const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

/**
 * A client address of the IPv6 documentation range, fresh for each run: the Redis store keeps the windows of
 * earlier runs for 15 minutes, so fixed addresses would arrive already counted.
 */
const runNet = randomBytes(4).toString('hex');
const ip = (host: number): string =>
  `2001:db8:${runNet.slice(0, 4)}:${runNet.slice(4)}::${host.toString(16)}`;

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
        assert.equal((await signIn(locked, 'wrong password', ip(i))).statusCode, 401);
      const refused = await signIn(locked, PASSWORD, ip(99));
      assert.equal(refused.statusCode, 429);
      assert.equal(refused.json().error.message, 'too many failed sign-ins: try again later');
      assert.equal((await signIn(other, PASSWORD, ip(99))).statusCode, 200);
    });

    it('a success clears the account’s failures', async () => {
      const email = await createUser(t, 'viewer');
      for (let i = 0; i < 4; i += 1)
        assert.equal((await signIn(email, 'wrong password', ip(50))).statusCode, 401);
      assert.equal((await signIn(email, PASSWORD, ip(50))).statusCode, 200);
      for (let i = 0; i < 4; i += 1)
        assert.equal((await signIn(email, 'wrong password', ip(50))).statusCode, 401);
      assert.equal(
        (await signIn(email, PASSWORD, ip(50))).statusCode,
        200,
        'four fresh failures do not lock',
      );
    });

    it('blocks an address after 30 failures across accounts, even for a right password', async () => {
      const address = ip(store.name === 'redis' ? 0xbad2 : 0xbad1);
      for (let i = 0; i < 30; i += 1) {
        const res = await signIn(
          `nobody-${i}-${runNet}-${store.name}@example.com`,
          'wrong password',
          address,
        );
        assert.equal(res.statusCode, 401);
      }
      const email = await createUser(t, 'owner');
      const blocked = await signIn(email, PASSWORD, address);
      assert.equal(blocked.statusCode, 429);
      assert.ok(blocked.json().error.retryAfter >= 1);
      assert.equal((await signIn(email, PASSWORD, ip(9))).statusCode, 200, 'another address signs in');
    });
  });
}
