/**
 * A claim of an idempotency key made again after its first try lost its answer (docs/decisions/0011-store-faults.md,
 * 0010-idempotency.md): the row the first try wrote holds the claim's own token, and the claim made again takes it
 * as its own, keeping its request id, where it would otherwise read as another request still in progress. A claim
 * under another token is refused as before. A claim ended unfinished (an answer that decided nothing) is taken over at
 * once by the same request retried, which keeps its request id; another request (another fingerprint) is refused the
 * key until it expires, as the first run's work may still go on. A claim past its lock (its process died) likewise.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { extended } from '../../src/domain/objects.ts';
import {
  type ClaimInput,
  claimIdempotencyKey,
  endIdempotencyClaim,
  renewIdempotencyClaim,
} from '../../src/store/idempotency.ts';
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

    it('a claim ended unfinished is continued by the same request, with its request id, at once', async () => {
      const db = testStore.store.db;
      const id = { orgId, env: 'live', key: 'k2' };
      assert.deepEqual(await claimIdempotencyKey(db, input('k2', 'token-a', 'request-1')), {
        claimed: true,
        requestId: 'request-1',
      });
      await endIdempotencyClaim(db, id, 'token-a', 'ended-a');
      // A renewal already on its way under the ended token changes nothing.
      await renewIdempotencyClaim(db, id, 'token-a', T0 + 60_000);
      const row = await db
        .selectFrom('idempotency_keys')
        .select(['token', 'locked_until', 'status', 'request_id'])
        .where('key', '=', 'k2')
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { token: 'ended-a', locked_until: 0, status: null, request_id: 'request-1' });
      assert.deepEqual(await claimIdempotencyKey(db, input('k2', 'token-b', 'request-2')), {
        claimed: true,
        requestId: 'request-1',
      });
    });

    it('another request under a key ended unfinished is refused it; once the key expired it starts its own', async () => {
      const db = testStore.store.db;
      assert.deepEqual(await claimIdempotencyKey(db, input('k3', 'token-a', 'request-1')), {
        claimed: true,
        requestId: 'request-1',
      });
      await endIdempotencyClaim(db, { orgId, env: 'live', key: 'k3' }, 'token-a', 'ended-a');
      const other = extended(input('k3', 'token-b', 'request-2'), { fingerprint: 'e'.repeat(64) });
      assert.deepEqual(await claimIdempotencyKey(db, other), {
        claimed: false,
        existing: {
          fingerprint: 'f'.repeat(64),
          answer: undefined,
          lockedUntil: 0,
          expiresAt: T0 + 86_400_000,
        },
      });
      const later = T0 + 86_400_000;
      const expired = extended(other, {
        now: later,
        lockedUntil: later + 60_000,
        expiresAt: later + 86_400_000,
      });
      assert.deepEqual(await claimIdempotencyKey(db, expired), { claimed: true, requestId: 'request-2' });
    });

    it('a claim past its lock (its process died) is taken over by the same request only', async () => {
      const db = testStore.store.db;
      await claimIdempotencyKey(db, input('k5', 'token-a', 'request-1'));
      const past = T0 + 60_000;
      const after = (token: string, fingerprint: string) =>
        extended(input('k5', token, 'request-2'), { fingerprint, now: past, lockedUntil: past + 60_000 });
      assert.deepEqual(await claimIdempotencyKey(db, after('token-b', 'e'.repeat(64))), {
        claimed: false,
        existing: {
          fingerprint: 'f'.repeat(64),
          answer: undefined,
          lockedUntil: past,
          expiresAt: T0 + 86_400_000,
        },
      });
      assert.deepEqual(await claimIdempotencyKey(db, after('token-c', 'f'.repeat(64))), {
        claimed: true,
        requestId: 'request-1',
      });
    });

    it('ending a claim another token holds, or one that kept its answer, changes nothing', async () => {
      const db = testStore.store.db;
      const id = { orgId, env: 'live', key: 'k4' };
      await claimIdempotencyKey(db, input('k4', 'token-a', 'request-1'));
      await endIdempotencyClaim(db, id, 'token-x', 'ended-x');
      const row = await db
        .selectFrom('idempotency_keys')
        .select(['token', 'locked_until'])
        .where('key', '=', 'k4')
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { token: 'token-a', locked_until: T0 + 60_000 });
    });
  });
}
