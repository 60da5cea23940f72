import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadWindow, saveWindows } from '../../src/store/rate-limit-windows.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The day window without Redis (docs/decisions/0019-rate-limits-and-plans.md): a write never lowers a running
 * window's count nor moves its end.
 */

const HOUR = 3_600_000;

for (const dialect of testDialects()) {
  describe(`stored day windows [${dialect}]`, () => {
    let testStore: TestStore;
    before(async () => {
      testStore = await createTestStore(dialect);
    });
    after(() => testStore.cleanup());

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
