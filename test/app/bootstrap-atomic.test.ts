/**
 * The first boot writes its organization, instance, key and dashboard owner in one transaction
 * (src/app/bootstrap.ts): a start that fails half-way (here the store refuses the key's row, as a start killed at
 * that instant would leave it) keeps nothing, so the next start bootstraps again. Written step by step, the store
 * kept an organization `default` nobody held a key for, and no later start printed one. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bootstrapIfEmpty } from '../../src/app/bootstrap.ts';
import { hashApiKey } from '../../src/security/api-keys.ts';
import { findApiKeyByHash } from '../../src/store/api-keys.ts';
import { checkViolation, createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects()) {
  describe(`the first boot is all or nothing [${dialect}]`, () => {
    let t: TestStore;
    let refusing = true;
    before(async () => {
      t = await createTestStore(dialect, {
        faults: (sql) => {
          if (refusing && /insert into "api_keys"/i.test(sql)) throw checkViolation('api_keys');
        },
      });
    });
    after(async () => {
      await t.cleanup();
    });

    const counts = async () => ({
      organizations: (await t.store.db.selectFrom('organizations').select('id').execute()).length,
      instances: (await t.store.db.selectFrom('instances').select('id').execute()).length,
      keys: (await t.store.db.selectFrom('api_keys').select('id').execute()).length,
      users: (await t.store.db.selectFrom('dashboard_users').select('id').execute()).length,
    });

    it('a boot refused at its key keeps nothing, and the next boot creates all four with a working key', async () => {
      await assert.rejects(bootstrapIfEmpty(t.store.db), /violates check constraint/);
      assert.deepEqual(await counts(), { organizations: 0, instances: 0, keys: 0, users: 0 });

      refusing = false;
      const boot = await bootstrapIfEmpty(t.store.db);
      assert.ok(boot, 'the second start bootstraps');
      assert.deepEqual(await counts(), { organizations: 1, instances: 1, keys: 1, users: 1 });
      const stored = await findApiKeyByHash(t.store.db, hashApiKey(boot.key.key));
      assert.equal(stored?.orgId, boot.org.id, 'the printed key is the stored one');
      assert.equal(await bootstrapIfEmpty(t.store.db), null, 'a third start finds the store set up');
    });
  });
}
