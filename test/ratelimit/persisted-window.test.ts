import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { PlanRateLimiter } from '../../src/ratelimit/limiter.ts';
import { PersistedWindows } from '../../src/ratelimit/persisted-window.ts';
import { loadWindow, saveWindows } from '../../src/store/rate-limit-windows.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The day window without Redis when the store cannot be read (docs/decisions/0019-rate-limits-and-plans.md): a key
 * whose load failed is counted in memory and not written; the load that succeeds later adds the stored count to
 * memory's, keeping the stored reset time; and a write never lowers a running window's count nor moves its end.
 */

const HOUR = 3_600_000;
const LIMITS = { perMinute: 1000, perDay: 1000 } as const;

/** A connection reset, as the driver reports a store it cannot reach. */
function connectionReset(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
}

for (const dialect of testDialects()) {
  describe(`stored day windows [${dialect}]`, () => {
    let testStore: TestStore;
    /** Reads of rate_limit_windows refused from now on: a number left, or every one while `true`. */
    let failReads: number | boolean = 0;
    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (!/^select .* from "rate_limit_windows"/i.test(sql)) return;
          if (failReads === true) throw connectionReset();
          if (typeof failReads === 'number' && failReads > 0) {
            failReads -= 1;
            throw connectionReset();
          }
        },
      });
    });
    after(() => testStore.cleanup());

    /** A limiter as after a boot, over the test store, that writes only when told to (`flush`). */
    function boot() {
      const persisted = new PersistedWindows({
        db: testStore.store.db,
        logger: pino({ level: 'silent' }),
        flushMs: HOUR,
      });
      return { persisted, limiter: new PlanRateLimiter(undefined, 'parley:test:rl', { persisted }) };
    }

    /** How many of `n` requests are allowed. */
    async function allowedOf(limiter: PlanRateLimiter, org: string, n: number): Promise<number> {
      let allowed = 0;
      for (let i = 0; i < n; i++) if ((await limiter.consume(org, 'live', LIMITS)).allowed) allowed += 1;
      return allowed;
    }

    it('a first read that failed is made again at the next request, which adds the stored count', async () => {
      const db = testStore.store.db;
      const resetAt = Date.now() + 10 * HOUR;
      await saveWindows(db, [{ key: 'day:org-a:live', consumed: 990, resetAt }], Date.now());
      const { persisted, limiter } = boot();
      try {
        failReads = 1;
        const first = await limiter.consume('org-a', 'live', LIMITS);
        assert.equal(first.allowed, true, 'a failed read never fails the request');
        assert.equal(first.windows[1].remaining, 999, 'counted in memory while the store was not read');
        const second = await limiter.consume('org-a', 'live', LIMITS);
        assert.equal(second.windows[1].remaining, 8, '990 stored + 2 counted in memory');
        const resetIn = second.windows[1].reset;
        assert.ok(Math.abs(resetIn - 10 * 3600) <= 2, `the stored window's end: resets in ${resetIn} s`);
        await persisted.flush();
        assert.deepEqual(await loadWindow(db, 'day:org-a:live', Date.now()), {
          key: 'day:org-a:live',
          consumed: 992,
          resetAt,
        });
        assert.equal(await allowedOf(limiter, 'org-a', 40), 8, 'the 8 left of the day quota, no more');
      } finally {
        failReads = 0;
        await limiter.close();
      }
    });

    it('while its reads fail a window is not written; the write that can read it stores the sum', async () => {
      const db = testStore.store.db;
      const resetAt = Date.now() + 10 * HOUR;
      await saveWindows(db, [{ key: 'day:org-b:live', consumed: 990, resetAt }], Date.now());
      const { persisted, limiter } = boot();
      try {
        failReads = true;
        assert.equal(await allowedOf(limiter, 'org-b', 3), 3);
        await persisted.flush();
        failReads = false;
        assert.deepEqual(
          await loadWindow(db, 'day:org-b:live', Date.now()),
          { key: 'day:org-b:live', consumed: 990, resetAt },
          'the stored count and end are kept while memory holds only its own count',
        );
        await persisted.flush();
        assert.deepEqual(await loadWindow(db, 'day:org-b:live', Date.now()), {
          key: 'day:org-b:live',
          consumed: 993,
          resetAt,
        });
        assert.equal(await allowedOf(limiter, 'org-b', 40), 7, 'the 7 left of the day quota, no more');
      } finally {
        failReads = 0;
        await limiter.close();
      }
    });

    it("a write never lowers a running window's count nor moves its end; a window that reset is replaced", async () => {
      const db = testStore.store.db;
      const now = Date.now();
      const resetAt = now + 10 * HOUR;
      await saveWindows(db, [{ key: 'day:org-c:live', consumed: 990, resetAt }], now);
      await saveWindows(db, [{ key: 'day:org-c:live', consumed: 1, resetAt: now + 24 * HOUR }], now);
      assert.deepEqual(await loadWindow(db, 'day:org-c:live', now), {
        key: 'day:org-c:live',
        consumed: 990,
        resetAt,
      });
      await saveWindows(db, [{ key: 'day:org-c:live', consumed: 995, resetAt: now + 24 * HOUR }], now);
      assert.deepEqual(await loadWindow(db, 'day:org-c:live', now), {
        key: 'day:org-c:live',
        consumed: 995,
        resetAt,
      });

      await saveWindows(db, [{ key: 'day:org-d:live', consumed: 990, resetAt: now - 1000 }], now - 2000);
      await saveWindows(db, [{ key: 'day:org-d:live', consumed: 3, resetAt: now + 24 * HOUR }], now);
      const row = await db
        .selectFrom('rate_limit_windows')
        .selectAll()
        .where('key', '=', 'day:org-d:live')
        .executeTakeFirst();
      assert.deepEqual(
        { consumed: Number(row?.consumed), resetAt: Number(row?.reset_at) },
        { consumed: 3, resetAt: now + 24 * HOUR },
        'a window that reset is a new one',
      );
    });
  });
}
