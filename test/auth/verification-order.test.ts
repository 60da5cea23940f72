import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { KeyAuthenticator } from '../../src/auth/authenticator.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { openTracedStore, type TracedStore } from '../support/plans.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * The order of a key's verification (docs/decisions/0003-scopes-and-keys.md, Verification): a malformed key or one
 * whose checksum is wrong is refused without asking the store; a well-formed key is read from the store once, then
 * answered from the cache, whose hit skips the checksum (the key passed it when it was cached).
 */
for (const dialect of testDialects()) {
  describe(`key verification order [${dialect}]`, () => {
    let ts: TestStore;
    let traced: TracedStore;
    let keys: KeyAuthenticator;
    let key: string;

    before(async () => {
      ts = await createTestStore(dialect);
      traced = await openTracedStore(ts);
      const org = await adminCreateOrg(ts.store.db, { name: 'order', plan: 'pro' });
      key = (await adminCreateKey(ts.store.db, { org: org.id, env: 'test' }, Date.now())).key;
      keys = new KeyAuthenticator(traced.store.db, {
        ttlMs: 60_000,
        revocationPollMs: 60_000,
        touchEveryMs: 60_000,
        clock: Date.now,
        logger: pino({ level: 'silent' }),
      });
    });

    after(async () => {
      await traced.store.destroy();
      await ts.cleanup();
    });

    const refused = async (header: string) => {
      const statements = await traced.statementsOf(async () => {
        await assert.rejects(keys.authenticate(header), (error: unknown) => {
          assert.ok(error instanceof DomainError);
          assert.equal(error.code, 'unauthenticated');
          return true;
        });
      }, 'api_keys');
      return statements;
    };

    it('refuses a malformed key and a wrong checksum without a statement', async () => {
      const last = key.at(-1) === 'a' ? 'b' : 'a';
      assert.deepEqual(await refused('Bearer svc_test_tooshort'), []);
      assert.deepEqual(await refused(`Bearer ${key.slice(0, -1)}${last}`), []);
      assert.deepEqual(await refused('Basic abc'), []);
    });

    it('reads a well-formed key from the store once, then from the cache', async () => {
      const first = await traced.statementsOf(() => keys.authenticate(`Bearer ${key}`), 'api_keys');
      assert.equal(first.filter((text) => /select/i.test(text)).length, 1, first.join('\n'));
      const again = await traced.statementsOf(() => keys.authenticate(`Bearer ${key}`), 'api_keys');
      assert.deepEqual(
        again.filter((text) => /select/i.test(text)),
        [],
      );
      assert.equal((await keys.authenticate(`Bearer ${key}`)).env, 'test');
    });
  });
}
