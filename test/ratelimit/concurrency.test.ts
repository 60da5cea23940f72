import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';

/**
 * Limits are exact under concurrency (docs/decisions/0019-rate-limits-and-plans.md): requests of one organization and
 * environment arriving together are served up to the quota and not one more, on the in-process counters and on Redis,
 * and the refused ones are given back (they spend neither window).
 */
const stores: { name: string; env: Record<string, string> }[] = [{ name: 'in-process', env: {} }];
if (process.env.TEST_REDIS_URL)
  stores.push({ name: 'redis', env: { REDIS_URL: process.env.TEST_REDIS_URL } });

for (const store of stores) {
  describe(`rate limits under concurrent requests [${store.name}]`, () => {
    let t: TestApp | undefined;
    afterEach(() => t?.close());

    /** Sends `n` status requests at once; the statuses in order, and the refusals' bodies. */
    async function burst(app: TestApp, n: number) {
      const answers = await Promise.all(
        Array.from({ length: n }, () => app.call('GET', '/v1/session/status')),
      );
      return answers;
    }

    it('the minute quota: exactly that many served of 50 at once, the others 429 and not counted', async () => {
      t = await createTestApp({ env: store.env, plan: { plan: 'enterprise', perMinute: 20, perDay: 30 } });
      const answers = await burst(t, 50);
      assert.deepEqual(
        [answers.filter((a) => a.status === 200).length, answers.filter((a) => a.status === 429).length],
        [20, 30],
      );
      for (const refused of answers.filter((a) => a.status === 429)) {
        assert.equal(refused.body.error.message, 'rate limit exceeded');
        assert.equal(refused.headers['retry-after'], String(refused.body.error.retryAfter));
      }
      // The day spent only what was served.
      const [minute, day] = await t.services.limiter.usage(t.org.id, 'test', { perMinute: 20, perDay: 30 });
      assert.deepEqual([minute.remaining, day.remaining], [0, 10]);
    });

    it('the day quota: exactly that many served of 50 at once, the minute given back for the others', async () => {
      t = await createTestApp({ env: store.env, plan: { plan: 'enterprise', perMinute: 100, perDay: 20 } });
      const answers = await burst(t, 50);
      assert.deepEqual(
        [answers.filter((a) => a.status === 200).length, answers.filter((a) => a.status === 429).length],
        [20, 30],
      );
      const [minute, day] = await t.services.limiter.usage(t.org.id, 'test', { perMinute: 100, perDay: 20 });
      assert.deepEqual([minute.remaining, day.remaining], [80, 0]);
    });
  });
}
