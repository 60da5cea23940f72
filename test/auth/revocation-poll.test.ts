import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';

/**
 * docs/decisions/0003-scopes-and-keys.md: "Every process polls the store for revocations each second, so a key revoked
 * by the CLI or on another node stops working everywhere within about 1 s, cache or not." The poll reads revocations
 * at or after the latest `revoked_at` it saw; a revocation stamped earlier than one already seen (another node's or
 * the CLI host's clock a few seconds ahead, or a revocation that commits after a later-stamped one) was never seen:
 * each poll now reaches back one cache lifetime before the latest it saw.
 */
for (const dialect of testDialects()) {
  describe(`revocations stamped before one already seen [${dialect}]`, () => {
    let t: TestApp;
    beforeEach(async () => {
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
    });
    afterEach(() => t.close());

    async function idOf(key: string): Promise<string> {
      const row = await t.testStore.store.db
        .selectFrom('api_keys')
        .select('id')
        .where('key_hash', '=', hashApiKey(key))
        .executeTakeFirstOrThrow();
      return row.id;
    }

    async function statusWith(key: string): Promise<number> {
      return (await t.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${key}` }))
        .status;
    }

    /** Whether `key` is refused within `ms` (the poll runs every 50 ms in tests; without it, the 30 s cache). */
    async function until401(key: string, ms: number): Promise<boolean> {
      return eventually(`key refused`, async () => (await statusWith(key)) === 401, ms).then(
        () => true,
        () => false,
      );
    }

    it('a key revoked by another process stops working within about 1 s, even after a revocation stamped later', async () => {
      const earlier = await t.newKey();
      const victim = await t.newKey();
      assert.equal(await statusWith(victim), 200, 'cached now');
      // The CLI on a host whose clock runs 3 s ahead revokes another key; this process's poll sees it.
      await revokeApiKey(
        t.testStore.store.db,
        await idOf(earlier),
        new Date(Date.now() + 3000).toISOString(),
      );
      assert.ok(await until401(earlier, 2000), 'the first revocation is seen');
      // Now this node (or the CLI on a host with the right time) revokes the victim.
      await revokeApiKey(t.testStore.store.db, await idOf(victim), new Date().toISOString());
      assert.ok(await until401(victim, 2000), 'the revoked key still works 2 s after its revocation');
    });

    it("the dashboard's revoke stops the key in this process at once, even after a later-stamped revocation", async () => {
      const earlier = await t.newKey();
      const victim = await t.newKey();
      assert.equal(await statusWith(victim), 200, 'cached now');
      await revokeApiKey(
        t.testStore.store.db,
        await idOf(earlier),
        new Date(Date.now() + 3000).toISOString(),
      );
      assert.ok(await until401(earlier, 2000), 'the first revocation is seen');
      await t.services.app.dashboard.revokeKey(t.org.id, await idOf(victim));
      assert.equal(
        await statusWith(victim),
        401,
        'revokeKey promises: this process stops accepting it at once',
      );
    });
  });
}
