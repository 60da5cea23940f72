import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { PlanRateLimiter } from '../../src/ratelimit/limiter.ts';
import { createTestApp, type TestApp } from '../support/app.ts';

/** Rate-limit stores under test: in-process always, Redis when TEST_REDIS_URL is set (the runner says when not). */
const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

for (const store of stores) {
  describe(`plan rate limits (docs/api.md#rate-limits, docs/decisions/0019-rate-limits-and-plans.md) [${store.name}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ env: store.env, plan: { plan: 'enterprise', perMinute: 3, perDay: 5 } });
    });
    after(() => t.close());

    it('counts per minute, answers 429 with retryAfter and headers, and does not spend the day on rejections', async () => {
      for (let i = 1; i <= 3; i++) {
        const r = await t.call('GET', '/v1/session/status');
        assert.equal(r.status, 200);
        assert.equal(r.headers['ratelimit-policy'], '"minute";q=3;w=60, "day";q=5;w=86400');
        assert.match(
          String(r.headers.ratelimit),
          new RegExp(`^"minute";r=${3 - i};t=\\d+, "day";r=${5 - i};t=\\d+$`),
        );
      }
      for (let i = 0; i < 3; i++) {
        const limited = await t.call('GET', '/v1/session/status');
        assert.equal(limited.status, 429);
        const retryAfter = limited.body.error.retryAfter;
        assert.ok(
          Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
          `retryAfter ${retryAfter}`,
        );
        assert.deepEqual(limited.body, { error: { code: 429, message: 'rate limit exceeded', retryAfter } });
        assert.equal(limited.headers['retry-after'], String(retryAfter));
        assert.match(String(limited.headers.ratelimit), /^"minute";r=0;t=\d+, "day";r=2;t=\d+$/);
      }
      const metrics = await t.app.inject({ url: '/metrics' });
      assert.match(metrics.body, /parley_rate_limited_total\{window="minute"\} 3/);
    });

    it('keeps test and live traffic in separate counters, and organizations apart', async () => {
      const live = await t.newKey({ env: 'live' });
      const liveInstance = await t.newInstance('live', 'live-1');
      const r = await t.call('GET', `/v1/session/status?from=${liveInstance.id}`, undefined, {
        authorization: `Bearer ${live}`,
      });
      assert.equal(r.status, 200, 'live quota untouched by test traffic');
      assert.match(String(r.headers.ratelimit), /^"minute";r=2;t=\d+, "day";r=4;t=\d+$/);

      const other = await createTestApp({ env: store.env, testStore: t.testStore, clock: t.clock });
      try {
        const fresh = await other.call('GET', '/v1/session/status');
        assert.equal(fresh.status, 200);
        assert.equal(
          fresh.headers['ratelimit-policy'],
          '"minute";q=60;w=60, "day";q=1000;w=86400',
          'free plan',
        );
        assert.match(String(fresh.headers.ratelimit), /^"minute";r=59;t=\d+, "day";r=999;t=\d+$/);
      } finally {
        await other.close();
      }
    });

    it('stops at the day window with a retryAfter up to a day, giving the minute back', async () => {
      const redis = store.name === 'redis' ? new Redis(process.env.TEST_REDIS_URL ?? '') : undefined;
      after(() => redis?.quit());
      const limiter = new PlanRateLimiter(redis, `parley:test:${Math.random().toString(36).slice(2)}`);
      const limits = { perMinute: 10, perDay: 2 };
      assert.equal((await limiter.consume('org', 'test', limits)).allowed, true);
      assert.equal((await limiter.consume('org', 'test', limits)).allowed, true);
      const denied = await limiter.consume('org', 'test', limits);
      assert.equal(denied.allowed, false);
      assert.ok(
        (denied.retryAfter ?? 0) > 60 && (denied.retryAfter ?? 0) <= 86_400,
        `retryAfter ${denied.retryAfter}`,
      );
      const [minute, day] = denied.windows;
      assert.equal(day.remaining, 0);
      assert.equal(minute.remaining, 8, 'the day-rejected request is given back to the minute window');
      assert.equal((await limiter.consume('other-org', 'test', limits)).allowed, true, 'per organization');
      assert.equal((await limiter.consume('org', 'live', limits)).allowed, true, 'per environment');
    });

    it("a minute refusal while the day is spent too tells the day's wait, in the body and both headers", async () => {
      const both = await createTestApp({
        env: store.env,
        testStore: t.testStore,
        clock: t.clock,
        plan: { plan: 'enterprise', perMinute: 2, perDay: 2 },
      });
      try {
        for (let i = 0; i < 2; i++) assert.equal((await both.call('GET', '/v1/session/status')).status, 200);
        const limited = await both.call('GET', '/v1/session/status');
        assert.equal(limited.status, 429);
        const match = /^"minute";r=0;t=(\d+), "day";r=0;t=(\d+)$/.exec(String(limited.headers.ratelimit));
        assert.ok(match, `RateLimit ${String(limited.headers.ratelimit)}`);
        const dayWait = Number(match[2]);
        assert.ok(dayWait > 86_400 - 60, `the day resets in ${dayWait} s`);
        const retryAfter = limited.body.error.retryAfter;
        assert.equal(retryAfter, dayWait, "the longest wait of the spent windows, not the minute's");
        assert.equal(limited.headers['retry-after'], String(dayWait));
      } finally {
        await both.close();
      }
    });
  });
}

describe('Pro plan limits', () => {
  it('advertises 300 per minute and 10,000 per day', async () => {
    const t = await createTestApp({ plan: { plan: 'pro' } });
    try {
      const r = await t.call('GET', '/v1/session/status');
      assert.equal(r.headers['ratelimit-policy'], '"minute";q=300;w=60, "day";q=10000;w=86400');
    } finally {
      await t.close();
    }
  });
});
