import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import { createTestApp, manualClock, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';

/**
 * docs/decisions/0003-scopes-and-keys.md: "Every process polls the store for revocations each second, so a key revoked
 * by the CLI or on another node stops working everywhere within about 1 s, cache or not." The poll reads revocations
 * at or after the latest `revoked_at` it saw; a revocation stamped earlier than one already seen (another node's or
 * the CLI host's clock a few seconds ahead, or a revocation that commits after a later-stamped one) was never seen:
 * each poll now reaches back one cache lifetime before the latest it saw. A revocation stamped more than a cache
 * lifetime ahead (a host whose clock runs a minute ahead, a time set by hand) moved that point into the future, and
 * every revocation stamped after it with the right time was missed until the cached key aged out: the look-back now
 * never starts past this process's own clock, and the dashboard's revoke drops the key from its own cache at once.
 * A process whose own clock ran more than a cache lifetime ahead of the revoker's still missed every revocation: the
 * poll now reads the cached keys' own rows and compares no time at all
 * (docs/decisions/0119-revocation-look-reads-the-cached-keys.md); these cases stay as its checks.
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

    /**
     * Uses `key` until it is surely cached: a read that a poll overlaps is not cached, and on SQLite the 50 ms poll
     * often overlaps one read.
     */
    async function cache(key: string): Promise<void> {
      for (let i = 0; i < 20; i += 1) assert.equal(await statusWith(key), 200, 'the key works');
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

    it('a revocation stamped more than a cache lifetime ahead does not hide the revocations stamped after it', async () => {
      const ahead = await t.newKey();
      const victim = await t.newKey();
      // Both cached: the first refusal of `ahead` then says that the poll saw its revocation.
      await cache(ahead);
      await cache(victim);
      // The CLI on a host whose clock runs 60 s ahead (the cache lifetime is 30 s) revokes another key.
      await revokeApiKey(
        t.testStore.store.db,
        await idOf(ahead),
        new Date(Date.now() + 60_000).toISOString(),
      );
      assert.ok(await until401(ahead, 2000), 'the future-stamped revocation is seen');
      // The CLI on a host with the right time revokes the victim: the poll must find it.
      await revokeApiKey(t.testStore.store.db, await idOf(victim), new Date().toISOString());
      assert.ok(await until401(victim, 2000), 'the revoked key still works 2 s after its revocation');
    });

    it("the dashboard's revoke stops the key in this process at once, after a revocation stamped far ahead", async () => {
      const ahead = await t.newKey();
      const victim = await t.newKey();
      // Both cached: the first refusal of `ahead` then says that the poll saw its revocation.
      await cache(ahead);
      await cache(victim);
      await revokeApiKey(
        t.testStore.store.db,
        await idOf(ahead),
        new Date(Date.now() + 60_000).toISOString(),
      );
      assert.ok(await until401(ahead, 2000), 'the future-stamped revocation is seen');
      await t.services.app.dashboard.revokeKey(t.org.id, await idOf(victim));
      assert.equal(await statusWith(victim), 401, 'this process stops accepting it at once');
    });
  });

  describe(`a revocation by another process whatever the clocks say [${dialect}]`, () => {
    it("stops a cached key within a poll when this process's clock runs an hour ahead of the revoker's", async () => {
      // The CLI (or another node) stamps the revocation with its host's time; this process's clock runs an hour
      // ahead. The poll must find the revocation all the same: "stops working everywhere within about 1 s, cache or
      // not" (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0119-revocation-look-reads-the-cached-keys.md).
      const t = await createTestApp({
        dialect,
        clock: manualClock(Date.now() + 3_600_000),
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      try {
        const victim = await t.newKey();
        const status = async () =>
          (await t.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${victim}` }))
            .status;
        for (let i = 0; i < 20; i += 1) assert.equal(await status(), 200, 'the key works');
        const { id } = await t.testStore.store.db
          .selectFrom('api_keys')
          .select('id')
          .where('key_hash', '=', hashApiKey(victim))
          .executeTakeFirstOrThrow();
        await revokeApiKey(t.testStore.store.db, id);
        const refused = await eventually('key refused', async () => (await status()) === 401, 2000).then(
          () => true,
          () => false,
        );
        assert.ok(refused, 'the revoked key still works 2 s after its revocation');
      } finally {
        await t.close();
      }
    });
  });

  describe(`the dashboard's revoke whatever the clocks say [${dialect}]`, () => {
    it('drops the key from its own cache even when the poll cannot find the revocation', async () => {
      // This process's clock runs an hour ahead of the revocation's stamp (the store's rows are stamped with the
      // host's time); the dashboard's revoke does not wait for the poll (which now finds it too,
      // docs/decisions/0119-revocation-look-reads-the-cached-keys.md).
      const t = await createTestApp({
        dialect,
        clock: manualClock(Date.now() + 3_600_000),
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      try {
        const victim = await t.newKey();
        const status = async () =>
          (await t.call('GET', '/v1/session/status', undefined, { authorization: `Bearer ${victim}` }))
            .status;
        for (let i = 0; i < 20; i += 1) assert.equal(await status(), 200, 'the key works');
        const { id } = await t.testStore.store.db
          .selectFrom('api_keys')
          .select('id')
          .where('key_hash', '=', hashApiKey(victim))
          .executeTakeFirstOrThrow();
        await t.services.app.dashboard.revokeKey(t.org.id, id);
        assert.equal(await status(), 401, 'revokeKey promises: this process stops accepting it at once');
      } finally {
        await t.close();
      }
    });
  });
}
