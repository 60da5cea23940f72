import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { IN_PROGRESS_MESSAGE } from '../../src/app/idempotency.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { StoreClock } from '../../src/nodes/store-clock.ts';
import { createTestApp, manualClock, type TestApp } from '../support/app.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * `Idempotency-Key` claims on two nodes whose wall clocks are two minutes apart (docs/decisions/0010-idempotency.md):
 * a claim's lock is compared across nodes, so it is set and judged on the store's clock, the node's one `StoreClock`
 * (docs/decisions/0008-leases-and-fencing.md, "One clock"). Judged on the nodes' wall clocks, the lock a node
 * running behind set was already past for a node on time, which took the running claim over and ran the request a
 * second time beside the first. Two apps in this process share one store, each with its own skewed wall clock.
 */

/** How far node A's wall clock runs behind, ms: more than the claim's 60 s lock. */
const SKEW_MS = 120_000;

for (const dialect of testDialects()) {
  describe(`Idempotency-Key on nodes whose clocks differ [${dialect}]`, () => {
    let shared: TestStore;
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      shared = await createTestStore(dialect);
      const node = async (skewMs: number) => {
        const clock = manualClock(Date.now() + skewMs);
        const storeClock = new StoreClock({
          db: shared.store.db,
          logger: pino({ level: 'silent' }),
          wall: clock,
        });
        await storeClock.sync();
        return createTestApp({
          dialect,
          testStore: shared,
          clock,
          storeClock,
          idempotencyOnStoreClock: true,
        });
      };
      a = await node(-SKEW_MS);
      b = await node(0);
    });
    after(async () => {
      await b?.close();
      await a?.close();
      await shared?.cleanup();
    });

    it('a claim running on a node behind is not taken over by a node on time', async () => {
      const id = { orgId: a.org.id, env: 'test', key: 'skewed-1' };
      const first = await a.services.app.idempotency.begin(id, 'fingerprint-1');
      assert.equal(first.kind, 'run');
      await assert.rejects(
        b.services.app.idempotency.begin(id, 'fingerprint-1'),
        (error: unknown) =>
          error instanceof DomainError && error.code === 'conflict' && error.message === IN_PROGRESS_MESSAGE,
      );
      const rows = await shared.store.db
        .selectFrom('idempotency_keys')
        .select('token')
        .where('key', '=', 'skewed-1')
        .execute();
      assert.deepEqual(
        rows,
        [{ token: first.kind === 'run' ? first.claim.token : '' }],
        'still the first claim',
      );
    });

    it("a claim's lock and expiry are set on the store's clock", async () => {
      const id = { orgId: a.org.id, env: 'test', key: 'skewed-2' };
      const first = await a.services.app.idempotency.begin(id, 'fingerprint-2');
      assert.equal(first.kind, 'run');
      const row = await shared.store.db
        .selectFrom('idempotency_keys')
        .select(['locked_until', 'expires_at'])
        .where('key', '=', 'skewed-2')
        .executeTakeFirstOrThrow();
      const storeNow = a.services.storeClock.now();
      // Set on the store's clock: about 60 s and 24 h from now, whichever node's wall clock.
      assert.ok(Math.abs(Number(row.locked_until) - (storeNow + 60_000)) < 5_000, `lock ${row.locked_until}`);
      assert.ok(
        Math.abs(Number(row.expires_at) - (storeNow + 86_400_000)) < 5_000,
        `expiry ${row.expires_at}`,
      );
    });
  });
}
