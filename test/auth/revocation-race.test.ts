/**
 * A key read that a revocation and its look for revocations overlap is not cached (docs/decisions/0078-store-signals.md:
 * a key revoked anywhere is refused as soon as the `keys` signal is heard): the look, run while the row was still
 * being read, found nothing cached to evict, so a row read before the revocation committed must not stay in the cache
 * after it. Before, such a row was cached and the key accepted until the next look a second later. Runs on SQLite, and
 * on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { KeyAuthenticator } from '../../src/auth/authenticator.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { revokeApiKey } from '../../src/store/api-keys.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

/**
 * `db` whose next read of `organizations` (the authenticator's second read, after the key's row) waits, before it is
 * run, until the returned `open` is called: nothing holds the store's connection meanwhile. `reached` resolves once
 * that read waits.
 */
function holdingNextOrganizationRead(db: Kysely<Database>): {
  db: Kysely<Database>;
  reached: Promise<void>;
  open: () => void;
} {
  let reach: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  let armed = true;
  /** `builder` whose `executeTakeFirst`, and that of every builder its methods return, first waits for `opened`. */
  const gated = (builder: object): object =>
    new Proxy(builder, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        if (property === 'executeTakeFirst') {
          return async (...args: unknown[]) => {
            reach();
            await opened;
            return Reflect.apply(value, target, args);
          };
        }
        return (...args: unknown[]) => {
          const result: unknown = Reflect.apply(value, target, args);
          return typeof result === 'object' && result !== null && 'executeTakeFirst' in result
            ? gated(result)
            : result;
        };
      },
    });
  const held = new Proxy(db, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'selectFrom' && typeof value === 'function') {
        return (table: unknown) => {
          const builder: unknown = Reflect.apply(value, target, [table]);
          if (!armed || table !== 'organizations' || typeof builder !== 'object' || builder === null)
            return builder;
          armed = false;
          return gated(builder);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: held, reached, open };
}

for (const dialect of testDialects()) {
  describe(`a key read across its revocation [${dialect}]`, () => {
    let testStore: TestStore;
    before(async () => {
      testStore = await createTestStore(dialect);
    });
    after(() => testStore.cleanup());

    it('is answered from what it read, and not cached: the next request is refused', async () => {
      const store = testStore.store.db;
      const org = await adminCreateOrg(store, { name: 'revocation race', plan: 'pro' });
      const created = await adminCreateKey(store, { org: org.id, env: 'test' }, Date.now());
      const held = holdingNextOrganizationRead(store);
      const keys = new KeyAuthenticator(held.db, {
        ttlMs: 60_000,
        revocationPollMs: 60_000,
        touchEveryMs: 60_000,
        clock: Date.now,
        logger: pino({ level: 'silent' }),
      });
      const header = `Bearer ${created.key}`;
      const first = keys.authenticate(header);
      await held.reached;
      // The key's row was read; the key is revoked and the look its signal starts runs to its end meanwhile.
      await revokeApiKey(store, created.record.id);
      await keys.pollRevocations();
      held.open();
      assert.equal((await first).keyId, created.record.id, 'the request that raced the revocation');
      await assert.rejects(
        keys.authenticate(header),
        (error: unknown) => error instanceof DomainError && error.code === 'unauthenticated',
      );
    });
  });
}
