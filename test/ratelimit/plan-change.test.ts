import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminUpdateOrg } from '../../src/app/organizations.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';

/**
 * A plan change keeps the organization's counts (docs/decisions/0019-rate-limits-and-plans.md: counters are kept per
 * organization and environment; "changing it applies at the next request"). A change of plan changes the quotas, not
 * what the organization already spent in the current minute and day.
 */

const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

const remaining = (header: unknown, window: 'minute' | 'day') =>
  Number(new RegExp(`"${window}";r=(\\d+)`).exec(String(header))?.[1]);

for (const store of stores) {
  describe(`a plan change keeps the counts spent [${store.name}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({
        env: { ...store.env, AUTH_CACHE_TTL_SECONDS: '0' },
        plan: { plan: 'enterprise', perMinute: 10, perDay: 20 },
      });
    });
    after(() => t.close());

    it('an organization moved to a lower limit mid-minute is over it at once', async () => {
      for (let i = 0; i < 8; i++) assert.equal((await t.call('GET', '/v1/session/status')).status, 200);
      // The operator lowers the limits: 8 requests were already made this minute, the new quota is 5.
      await adminUpdateOrg(t.services.store.db, { org: t.org.id, perMinute: 5, perDay: 12 });
      t.clock.advance(1); // past the key cache (AUTH_CACHE_TTL_SECONDS=0)
      const next = await t.call('GET', '/v1/session/status');
      assert.equal(next.headers['ratelimit-policy'], '"minute";q=5;w=60, "day";q=12;w=86400');
      assert.equal(
        next.status,
        429,
        `8 of 5 spent this minute, yet: ${next.status} ${next.headers.ratelimit}`,
      );
    });

    it('a change of limits does not hand out a fresh day: the day count carries over', async () => {
      // 8 requests counted under the old limits (20 a day); the new day quota is 12: 4 are left, not 12.
      await adminUpdateOrg(t.services.store.db, { org: t.org.id, perMinute: 100, perDay: 12 });
      t.clock.advance(1);
      const next = await t.call('GET', '/v1/session/status');
      assert.equal(next.status, 200, next.raw.body);
      assert.equal(remaining(next.headers.ratelimit, 'day'), 12 - 9, String(next.headers.ratelimit));
    });
  });
}

/**
 * Only served requests are counted (docs/decisions/0019-rate-limits-and-plans.md: a limit change applies at the next
 * request, to what the organization already spent): a refused request is given back to the window that refused it,
 * and to the minute window when the day refused it, so a raised limit lets the organization go on at once.
 */
for (const store of stores) {
  describe(`refused requests are not counted [${store.name}]`, () => {
    const status = (t: TestApp) => t.call('GET', '/v1/session/status');

    it('day: 3 served and 7 refused at 3 a day; raised to 5, two more are served', async () => {
      const t = await createTestApp({
        env: { ...store.env, AUTH_CACHE_TTL_SECONDS: '0' },
        plan: { plan: 'enterprise', perMinute: 1000, perDay: 3 },
      });
      try {
        const answers: string[] = [];
        for (let i = 0; i < 10; i++) {
          const res = await status(t);
          answers.push(
            `${res.status} minute=${remaining(res.headers.ratelimit, 'minute')} day=${remaining(res.headers.ratelimit, 'day')}`,
          );
        }
        assert.deepEqual(answers, [
          '200 minute=999 day=2',
          '200 minute=998 day=1',
          '200 minute=997 day=0',
          ...Array(7).fill('429 minute=997 day=0'),
        ]);
        await adminUpdateOrg(t.services.store.db, { org: t.org.id, perDay: 5 });
        t.clock.advance(1); // past the key cache (AUTH_CACHE_TTL_SECONDS=0)
        const served = [];
        for (let i = 0; i < 3; i++) {
          const res = await status(t);
          served.push(`${res.status} day=${remaining(res.headers.ratelimit, 'day')}`);
        }
        assert.deepEqual(served, ['200 day=1', '200 day=0', '429 day=0']);
        const usage = await t.services.limiter.usage(t.org.id, 'test', { perMinute: 1000, perDay: 5 });
        assert.deepEqual(
          usage.map((w) => `${w.name} ${w.remaining}`),
          ['minute 995', 'day 0'],
          'the minute and the day each counted the 5 served requests alone',
        );
      } finally {
        await t.close();
      }
    });

    it('minute: 3 served and 7 refused at 3 a minute; raised to 5, two more are served', async () => {
      const t = await createTestApp({
        env: { ...store.env, AUTH_CACHE_TTL_SECONDS: '0' },
        plan: { plan: 'enterprise', perMinute: 3, perDay: 1000 },
      });
      try {
        const answers: number[] = [];
        for (let i = 0; i < 10; i++) answers.push((await status(t)).status);
        assert.deepEqual(answers, [200, 200, 200, ...Array(7).fill(429)]);
        await adminUpdateOrg(t.services.store.db, { org: t.org.id, perMinute: 5 });
        t.clock.advance(1);
        const served = [];
        for (let i = 0; i < 3; i++) {
          const res = await status(t);
          served.push(
            `${res.status} minute=${remaining(res.headers.ratelimit, 'minute')} day=${remaining(res.headers.ratelimit, 'day')}`,
          );
        }
        assert.deepEqual(served, ['200 minute=1 day=996', '200 minute=0 day=995', '429 minute=0 day=995']);
      } finally {
        await t.close();
      }
    });
  });
}

/**
 * A plan change reaches the keys already cached (docs/decisions/0019-rate-limits-and-plans.md: it applies at the next
 * request, the key cache's poll aside): with the default key cache (AUTH_CACHE_TTL_SECONDS=30), `parley org update`
 * (another process, writing the store) used to leave the old plan in the cached organization for up to 30 s. Every
 * process's look for revocations (each second; 50 ms in the tests) now reads the cached organizations again and
 * evicts the keys of a changed one, and on PostgreSQL the change signals that look at once.
 */
for (const dialect of testDialects()) {
  describe(`a plan change reaches the cached keys [${dialect}]`, () => {
    it('the next requests after the change see the new limits, well before the cache would expire', async () => {
      const t = await createTestApp({ dialect, plan: { plan: 'free' } });
      try {
        const policy = async () => (await t.call('GET', '/v1/session/status')).headers['ratelimit-policy'];
        const free = '"minute";q=60;w=60, "day";q=1000;w=86400';
        // Surely cached: a read that a look overlaps is not cached, so a few requests.
        for (let i = 0; i < 10; i++) assert.equal(await policy(), free);
        await adminUpdateOrg(t.testStore.store.db, { org: t.org.id, plan: 'pro' });
        // The manual clock stands still: the 30 s cache never expires here, only the look can evict the key.
        await eventually(
          'the pro plan applies',
          async () => (await policy()) === '"minute";q=300;w=60, "day";q=10000;w=86400',
          2000,
        );
        await adminUpdateOrg(t.testStore.store.db, {
          org: t.org.id,
          plan: 'enterprise',
          perMinute: 7,
          perDay: 70,
        });
        await eventually(
          'the enterprise limits apply',
          async () => (await policy()) === '"minute";q=7;w=60, "day";q=70;w=86400',
          2000,
        );
      } finally {
        await t.close();
      }
    });
  });
}
