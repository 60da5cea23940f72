import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SIGN_IN_LIMITS } from '../../src/ratelimit/sign-in.ts';
import { verifyPassword } from '../../src/security/passwords.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createUser, PASSWORD } from './support.ts';

/** Sign-in limiter stores: in-process always, Redis when TEST_REDIS_URL is set (the runner says when not). */
const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

/**
 * A client address of the IPv6 documentation range in a /64 of its own for each `net` (the address window counts
 * a /64 as one client), fresh for each run: the Redis store keeps the windows of earlier runs for 15 minutes, so
 * fixed addresses would arrive already counted. `host` sets the low bits, within the /64.
 */
const runNet = randomBytes(2).toString('hex');
const ip = (net: number, host = 1): string => `2001:db8:${runNet}:${net.toString(16)}::${host.toString(16)}`;

for (const store of stores) {
  describe(`dashboard sign-in slowing per account and per address [${store.name}]`, () => {
    let t: TestApp;
    /** Argon2id checks so far: every check goes through the real verifier, counted here. */
    let checks = 0;
    before(async () => {
      t = await createTestApp({
        env: store.env,
        verifyPassword: (stored, password) => {
          checks += 1;
          return verifyPassword(stored, password);
        },
      });
    });
    after(() => t.close());

    const signIn = (email: string, password: string, remoteAddress: string) =>
      t.app.inject({
        method: 'POST',
        url: '/dashboard/api/sign-in',
        payload: { email, password },
        remoteAddress,
      });

    it('60 concurrent wrong sign-ins for one account: all but the free ones refused before any password check', async () => {
      const email = await createUser(t, 'owner');
      const before = checks;
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) => signIn(email, `wrong password ${i}`, ip(0x100 + i))),
      );
      const statuses = answers.map((res) => res.statusCode);
      const checked = checks - before;
      const refused = statuses.filter((status) => status === 429).length;
      assert.equal(statuses.filter((status) => status === 401).length, checked, 'each check answered 401');
      assert.equal(checked + refused, 60);
      // The free attempts, plus the one that closes the gate.
      assert.ok(checked <= SIGN_IN_LIMITS.freeAttempts + 1, `${checked} passwords checked`);
      const tooMany = answers.find((res) => res.statusCode === 429);
      assert.deepEqual(tooMany?.json().error.message, 'too many sign-in attempts: try again later');
      assert.equal(tooMany?.headers['retry-after'], String(tooMany?.json().error.retryAfter));

      // The owner, from a fresh address, right after the burst: refused for at most the longest wait...
      const owner = ip(0xaaa);
      const early = await signIn(email, PASSWORD, owner);
      assert.equal(early.statusCode, 429);
      assert.ok(early.json().error.retryAfter <= SIGN_IN_LIMITS.maxDelayMs / 1000);
      // ...then signs in: no lockout.
      t.clock.advance(SIGN_IN_LIMITS.maxDelayMs);
      assert.equal((await signIn(email, PASSWORD, owner)).statusCode, 200);
    });

    it('40 concurrent sign-ins with the right password check it at most the free attempts plus one', async () => {
      const email = await createUser(t, 'member');
      const before = checks;
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => signIn(email, PASSWORD, ip(0x200 + i))),
      );
      const statuses = answers.map((res) => res.statusCode);
      assert.ok(checks - before <= SIGN_IN_LIMITS.freeAttempts + 1, `${checks - before} checks`);
      assert.ok(statuses.includes(200));
      assert.deepEqual(
        statuses.filter((status) => status !== 200 && status !== 429),
        [],
        'every other answer is a 429',
      );
    });

    it('the wait between attempts doubles after the free ones, up to the cap; a success clears it', async () => {
      const email = await createUser(t, 'viewer');
      const from = ip(0x300);
      for (let i = 0; i < SIGN_IN_LIMITS.freeAttempts; i += 1)
        assert.equal((await signIn(email, 'wrong password', from)).statusCode, 401);
      const waits: number[] = [];
      for (let i = 0; i < 7; i += 1) {
        assert.equal((await signIn(email, 'wrong password', from)).statusCode, 401);
        const refused = await signIn(email, 'wrong password', from);
        assert.equal(refused.statusCode, 429);
        waits.push(refused.json().error.retryAfter);
        t.clock.advance(refused.json().error.retryAfter * 1000);
      }
      assert.deepEqual(waits, [1, 2, 4, 8, 16, 30, 30]);
      assert.equal((await signIn(email, PASSWORD, from)).statusCode, 200);
      for (let i = 0; i < SIGN_IN_LIMITS.freeAttempts; i += 1)
        assert.equal((await signIn(email, 'wrong password', from)).statusCode, 401, 'free attempts again');
    });

    it('refuses an address after 30 password checks across accounts, even for a right password; successes give theirs back', async () => {
      const address = ip(store.name === 'redis' ? 0xbad2 : 0xbad1);
      const email = await createUser(t, 'owner');
      // Successes do not use up the address's checks.
      for (let i = 0; i < 40; i += 1) assert.equal((await signIn(email, PASSWORD, address)).statusCode, 200);
      for (let i = 0; i < 30; i += 1) {
        const res = await signIn(
          `nobody-${i}-${runNet}-${store.name}@example.com`,
          'wrong password',
          address,
        );
        assert.equal(res.statusCode, 401);
      }
      const before = checks;
      const blocked = await signIn(email, PASSWORD, address);
      assert.equal(blocked.statusCode, 429);
      assert.equal(checks, before, 'refused before the password is checked');
      assert.ok(blocked.json().error.retryAfter >= 1);
      assert.equal((await signIn(email, PASSWORD, ip(9))).statusCode, 200, 'another address signs in');
    });

    it('counts the addresses of one IPv6 /64 as one client, and an IPv4-mapped address as its IPv4 address', async () => {
      const net = store.name === 'redis' ? 0xbad4 : 0xbad3;
      for (let i = 0; i < 30; i += 1) {
        // A client moving through its /64: every check from another address of it.
        const res = await signIn(
          `nobody-${i}-${runNet}-${store.name}-64@example.com`,
          'wrong',
          ip(net, i + 1),
        );
        assert.equal(res.statusCode, 401);
      }
      const email = await createUser(t, 'owner');
      assert.equal(
        (await signIn(email, PASSWORD, ip(net, 0xffff))).statusCode,
        429,
        'a fresh address of the /64',
      );
      assert.equal(
        (await signIn(email, PASSWORD, ip(net + 1, 1))).statusCode,
        200,
        'the next /64 is another client',
      );

      // An address of the benchmarking range (RFC 2544), fresh for each run as the IPv6 ones are.
      const v4 = `198.18.${Number.parseInt(runNet.slice(0, 2), 16)}.${Number.parseInt(runNet.slice(2), 16)}`;
      for (let i = 0; i < 30; i += 1) {
        const res = await signIn(`nobody-${i}-${runNet}-${store.name}-v4@example.com`, 'wrong', v4);
        assert.equal(res.statusCode, 401);
      }
      assert.equal(
        (await signIn(email, PASSWORD, `::ffff:${v4}`)).statusCode,
        429,
        'the mapped form is the same client',
      );
    });
  });
}
