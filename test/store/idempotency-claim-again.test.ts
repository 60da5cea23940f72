/**
 * A claim of an idempotency key made again after its first try lost its answer (docs/decisions/0011-store-faults.md,
 * 0010-idempotency.md): the row the first try wrote holds the claim's own token, and the claim made again takes it
 * as its own, keeping its request id, where it would otherwise read as another request still in progress. A claim
 * under another token is refused as before.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ClaimInput, claimIdempotencyKey } from '../../src/store/idempotency.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`an idempotency key's claim made again [${dialect}]`, () => {
    let testStore: TestStore;
    let orgId = '';
    const input = (key: string, token: string, requestId: string): ClaimInput => ({
      orgId,
      env: 'live',
      key,
      fingerprint: 'f'.repeat(64),
      token,
      requestId,
      now: T0,
      lockedUntil: T0 + 60_000,
      expiresAt: T0 + 86_400_000,
    });

    before(async () => {
      testStore = await createTestStore(dialect);
      orgId = (await createOrganization(testStore.store.db, { name: 'keys', plan: 'free' })).id;
    });
    after(async () => {
      await testStore.cleanup();
    });

    it('finds its own unfinished row claimed, with the request id its first try wrote', async () => {
      const db = testStore.store.db;
      assert.deepEqual(await claimIdempotencyKey(db, input('k1', 'token-a', 'request-1')), {
        claimed: true,
        requestId: 'request-1',
      });
      assert.deepEqual(await claimIdempotencyKey(db, input('k1', 'token-a', 'request-1')), {
        claimed: true,
        requestId: 'request-1',
      });
      assert.deepEqual(await claimIdempotencyKey(db, input('k1', 'token-b', 'request-2')), {
        claimed: false,
        existing: {
          fingerprint: 'f'.repeat(64),
          answer: undefined,
          lockedUntil: T0 + 60_000,
          expiresAt: T0 + 86_400_000,
        },
      });
    });
  });
}
