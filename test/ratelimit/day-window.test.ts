import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { until } from '../webhooks/child.ts';

/**
 * The day window survives restarts on the embedded default (docs/decisions/0019-rate-limits-and-plans.md, no Redis):
 * a new app over the same store continues the day count where the previous one left it, exactly after a graceful stop
 * and up to the last one-second write after a crash. The minute window starts afresh (kept in memory only).
 */

const PLAN = { plan: 'enterprise', perMinute: 100, perDay: 5 } as const;

/** `GET /v1/session/status` as the first app's key (`t` may be a later app over the same store). */
function status(t: TestApp, key: string) {
  return t.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${key}` });
}

/** The `RateLimit` header's windows: remaining and seconds to reset. */
function windows(header: unknown) {
  const match = /^"minute";r=(\d+);t=(\d+), "day";r=(\d+);t=(\d+)$/.exec(String(header));
  assert.ok(match, `RateLimit header: ${String(header)}`);
  return {
    minute: { r: Number(match[1]), t: Number(match[2]) },
    day: { r: Number(match[3]), t: Number(match[4]) },
  };
}

async function storedDay(testStore: TestStore, orgId: string) {
  return testStore.store.db
    .selectFrom('rate_limit_windows')
    .selectAll()
    .where('key', '=', `day:${orgId}:test`)
    .executeTakeFirst();
}

for (const dialect of testDialects()) {
  describe(`day rate-limit window across restarts (${dialect})`, () => {
    it('a restart keeps the remaining day count; the quota runs out across it', async () => {
      const testStore = await createTestStore(dialect);
      const apps: TestApp[] = [];
      try {
        const first = await createTestApp({ testStore, plan: PLAN });
        apps.push(first);
        for (let i = 1; i <= 3; i++) {
          const r = await status(first, first.key);
          assert.equal(r.status, 200);
          assert.equal(windows(r.headers.ratelimit).day.r, 5 - i);
        }
        await first.close();
        apps.pop();
        const row = await storedDay(testStore, first.org.id);
        assert.equal(row?.consumed, 3, 'a graceful stop wrote the exact count');

        const second = await createTestApp({ testStore, plan: PLAN });
        apps.push(second);
        const after = await status(second, first.key);
        assert.equal(after.status, 200);
        const seen = windows(after.headers.ratelimit);
        assert.deepEqual([seen.minute.r, seen.day.r], [99, 1], 'minute starts afresh, day continues');
        assert.ok(seen.day.t > 86_400 - 120 && seen.day.t <= 86_400, `day resets in ${seen.day.t} s`);
        assert.equal(windows((await status(second, first.key)).headers.ratelimit).day.r, 0);
        const limited = await status(second, first.key);
        assert.equal(limited.status, 429);
        assert.ok(limited.body.error.retryAfter > 60, `retryAfter ${limited.body.error.retryAfter}`);
        assert.equal(windows(limited.headers.ratelimit).day.r, 0);
      } finally {
        for (const app of apps) await app.close();
        await testStore.cleanup();
      }
    });

    it('after a crash the count written within the last second is kept', async () => {
      const testStore = await createTestStore(dialect);
      const apps: TestApp[] = [];
      try {
        const first = await createTestApp({ testStore, plan: PLAN });
        apps.push(first);
        for (let i = 0; i < 4; i++) assert.equal((await status(first, first.key)).status, 200);
        // The periodic write (every second) records the count; the first app is then abandoned, never stopped.
        await until(
          async () => (await storedDay(testStore, first.org.id))?.consumed === 4,
          5000,
          'the day count is written within a second',
        );
        const row = await storedDay(testStore, first.org.id);
        const resetIn = Number(row?.reset_at) - Date.now();
        assert.ok(resetIn > 86_400_000 - 60_000 && resetIn <= 86_400_000, `stored reset in ${resetIn} ms`);

        const second = await createTestApp({ testStore, plan: PLAN });
        apps.push(second);
        const after = await status(second, first.key);
        assert.equal(after.status, 200);
        assert.equal(windows(after.headers.ratelimit).day.r, 0);
        assert.equal((await status(second, first.key)).status, 429, 'the quota is spent across the crash');
      } finally {
        for (const app of apps) await app.close();
        await testStore.cleanup();
      }
    });
  });
}

if (process.env.TEST_REDIS_URL) {
  describe('day rate-limit window with Redis', () => {
    it('stays in Redis (the shared store): nothing is written to the database', async () => {
      const t = await createTestApp({ env: { REDIS_URL: process.env.TEST_REDIS_URL ?? '' }, plan: PLAN });
      try {
        assert.equal((await status(t, t.key)).status, 200);
        await t.services.limiter.close();
        assert.equal(await storedDay(t.testStore, t.org.id), undefined);
      } finally {
        await t.close();
      }
    });
  });
}
