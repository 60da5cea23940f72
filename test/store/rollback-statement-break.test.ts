/**
 * A PostgreSQL connection that breaks while a statement before the commit runs (the transaction never reached its
 * commit, so nothing of it can have been kept) is not a commit whose answer was lost (`outcomeUnknown`,
 * docs/decisions/0011-store-faults.md). The store wrapper drops a rollback's error on a broken connection only after
 * the commit was sent; dropped after any statement, Kysely rethrew the statement's own "Connection terminated", read
 * as a lost commit answer, and the send queue dropped a status event instead of waiting out the store. The break is
 * real: the socket is closed while `pg_sleep` runs on the server. Only PostgreSQL (TEST_DATABASE_URL).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { SendQueue } from '../../src/sends/queue.ts';
import { outcomeUnknown } from '../../src/store/faults.ts';
import { breakConnections } from '../support/broken-connections.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`a connection broken during a statement before the commit [${dialect}]`, () => {
    let testStore: TestStore;
    let breakNext = false;
    let restore: (() => void) | undefined;

    before(async () => {
      testStore = await createTestStore(dialect);
      restore = breakConnections((text) => {
        if (!breakNext || !/pg_sleep\(0\.3\)/.test(text)) return undefined;
        breakNext = false;
        return 'after';
      });
    });
    after(async () => {
      restore?.();
      await testStore.cleanup();
    });

    const brokenTransaction = () =>
      testStore.store.db.transaction().execute(async (trx) => {
        await sql`select pg_sleep(0.3)`.execute(trx);
      });

    it('is not taken for a commit whose answer was lost', async () => {
      breakNext = true;
      const error = await brokenTransaction().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error, 'the transaction failed');
      assert.equal(
        outcomeUnknown(error),
        false,
        `never committed: ${String((error as Error).cause ?? error)}`,
      );
    });

    it('a send status whose transaction broke that way is recorded when the store answers again', async () => {
      let calls = 0;
      const queue = new SendQueue({
        db: testStore.store.db,
        session: () => undefined,
        nodeId: 'n',
        clock: Date.now,
        logger: pino({ level: 'silent' }),
        report: async () => {
          calls += 1;
          if (calls === 1) {
            breakNext = true;
            await brokenTransaction();
          }
        },
        recordWith: async () => {
          throw new Error('unused');
        },
      });
      await queue.report('i', { kind: 'message', id: 'm', status: 'sent', at: 0 });
      await queue.stop();
      assert.equal(calls, 2, 'tried again once the store answered');
    });
  });
}
