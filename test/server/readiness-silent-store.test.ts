import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kysely, PostgresDialect } from 'kysely';
import type { PoolClient } from 'pg';
import { ReadinessService } from '../../src/app/readiness.ts';
import { DomainError } from '../../src/domain/errors.ts';
import type { Database } from '../../src/store/schema.ts';
import { createTestStore } from '../support/store.ts';

/**
 * A store that stops answering with its connections left open (a network cut): the readiness check answers
 * `not_ready` with `Retry-After` once its time is up, instead of hanging (docs/deploy.md, Health checks: `/readyz`
 * answers 503 with `Retry-After` while the database cannot be reached).
 */
describe('readiness while the store does not answer', () => {
  it('is not_ready with retryAfter once its time is up', async () => {
    const testStore = await createTestStore('sqlite');
    // Every query of this pool waits forever, as over a connection whose peer went silent.
    const silent = {
      query: () => new Promise(() => undefined),
      release: () => undefined,
    } as unknown as PoolClient;
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: { connect: async () => silent, end: async () => undefined } }),
    });
    try {
      const readiness = new ReadinessService({ store: { ...testStore.store, db }, timeoutMs: 100 });
      await assert.rejects(readiness.check(), (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual(
          [error.code, error.message, error.retryAfter],
          ['not_ready', 'store is not ready', 5],
        );
        return true;
      });
      // A store that answers is ready.
      await new ReadinessService({ store: testStore.store, timeoutMs: 100 }).check();
    } finally {
      await testStore.cleanup();
    }
  });
});
