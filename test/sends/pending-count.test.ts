/**
 * The session status's count of due sends (`SendQueue.pendingSends`) is read from the queue's memory while this
 * process holds the connected session and its queue knows nothing is due, and from the store otherwise
 * (docs/decisions/0111-status-reads-the-queue-it-holds.md): an idle queue costs the status no statement; a send being
 * relayed, a send waiting its turn, a scheduled send whose time came before the queue's wake for it ran, and a
 * session that is not connected are all counted from the store, with the number the store holds. Runs on SQLite, and
 * on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/** How far ahead the scheduled send is due: its wake timer never fires during a test, the test moves the clock. */
const AHEAD = 600_000;

for (const dialect of testDialects()) {
  describe(`the status's count of due sends [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    let queue: SendQueue;
    let session: EngineSession;
    let connected = true;
    /** Statements counting the due sends (src/store/send-job-claims.ts `countDueSendJobs`) the store ran. */
    let counts = 0;
    /** Reads of the first pending job: what a drain does last when it can claim nothing (drain.ts). */
    let firstReads = 0;
    /** Relays of these ids wait for {@link release}. */
    const slow = new Set<string>();
    let release: () => void = () => undefined;
    let relaying = '';

    /** The count as the status reads it, with how many statements it ran. */
    const pending = async () => {
      const before = counts;
      const value = await queue.pendingSends(t.instance.id);
      return { value, statements: counts - before };
    };
    /**
     * Resolves once a drain begun after `reads` reads has read the first pending job and the queue counts nothing
     * from its memory (the drain's pass ended with nothing due).
     */
    const idleAgain = async (reads: number) => {
      await eventually('the drain to end', () => firstReads > reads);
      await eventually('the queue idle', async () => {
        const { value, statements } = await pending();
        return statements === 0 ? { value } : undefined;
      }).then((found) => assert.equal(found.value, 0));
    };

    /**
     * Stores queued send `id` scheduled {@link AHEAD} ms from now, lets the queue see it as the API does, and waits
     * for the drain that leaves the queue idle until then. @returns its due time (epoch ms).
     */
    const scheduleAhead = async (id: string) => {
      const at = t.clock() + AHEAD;
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        runAt: at,
        sendAt: at,
      });
      const reads = firstReads;
      queue.scheduled(t.instance.id, at);
      await idleAgain(reads);
      return at;
    };

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (text) => {
          if (!/send_jobs/.test(text)) return;
          if (/count\(\*\)/i.test(text)) counts += 1;
          else if (/not_before/.test(text) && /^\s*select/i.test(text)) firstReads += 1;
        },
      });
      t = await createTestApp({ dialect, testStore });
      t.clock.set(T0);
      session = fakeSession(
        async (message: OutgoingMessage) => {
          const id = message.id ?? '';
          if (slow.has(id)) {
            relaying = id;
            await new Promise<void>((resolve) => {
              release = resolve;
            });
          }
          return { id, timestamp: t.clock() };
        },
        () => connected,
      );
      // The sweep looks every 50 ms once started (the last test).
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, undefined, { sweepMs: 50 });
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'COUNT-WARM-UP');
      await eventually('the queue idle', async () => (await pending()).statements === 0);
    });
    after(async () => {
      await queue.stop();
      await t.close();
      await testStore.cleanup();
    });

    it('an idle queue of a connected session counts nothing, without a statement', async () => {
      assert.deepEqual(await pending(), { value: 0, statements: 0 });
    });

    it('a send being relayed and one waiting behind it are counted from the store', async () => {
      const first = '3EB0COUNT0000000000A1';
      const second = '3EB0COUNT0000000000A2';
      slow.add(first);
      for (const id of [first, second]) {
        await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', t.clock()));
        queue.submitted(t.instance.id);
      }
      await eventually('the first send being relayed', () => relaying === first);
      assert.deepEqual(await pending(), { value: 2, statements: 1 }, 'one sending, one pending');
      const reads = firstReads;
      release();
      await idleAgain(reads);
      assert.equal(
        await t.services.store.db
          .selectFrom('send_jobs')
          .select('id')
          .where('status', '=', 'pending')
          .executeTakeFirst(),
        undefined,
      );
    });

    it('a scheduled send whose time came before its wake ran is counted from the store', async () => {
      const at = await scheduleAhead('3EB0COUNT0000000000B1');
      t.clock.set(at);
      assert.deepEqual(await pending(), { value: 1, statements: 1 }, 'due: counted from the store');
      const relayed = firstReads;
      queue.wake(t.instance.id);
      await idleAgain(relayed);
    });

    it('a session that is not connected has its count read from the store, even with an idle queue', async () => {
      connected = false;
      try {
        assert.deepEqual(
          await pending(),
          { value: 0, statements: 1 },
          'the idle queue is not taken on its word',
        );
        // A send this queue was never told of (another node accepted it while the session was away here).
        const id = '3EB0COUNT0000000000C1';
        await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', t.clock()));
        assert.deepEqual(await pending(), { value: 1, statements: 1 });
        connected = true;
        const reads = firstReads;
        queue.wake(t.instance.id);
        await idleAgain(reads);
      } finally {
        connected = true;
      }
    });

    it('a due send the queue never heard of is found by the sweep, counted and relayed, even with a wake set later', async () => {
      const db = t.services.store.db;
      // A scheduled send sets the queue's wake ten minutes ahead.
      const later = '3EB0COUNT0000000000D1';
      await scheduleAhead(later);
      // A send stored by another node as the instance moved: nothing tells this queue.
      const unheard = '3EB0COUNT0000000000D2';
      await insertSendJob(db, textJob(t.instance.id, unheard, 'async', t.clock()));
      assert.deepEqual(await pending(), { value: 0, statements: 0 }, 'the memory does not know it yet');
      queue.start();
      const status = await eventually('the unheard-of send relayed', async () => {
        const row = await db
          .selectFrom('send_jobs')
          .select('status')
          .where('id', '=', unheard)
          .executeTakeFirst();
        return row?.status === 'sent' ? row.status : undefined;
      });
      assert.equal(status, 'sent');
      await idleAgain(firstReads - 1);
      const left = await db
        .selectFrom('send_jobs')
        .select('status')
        .where('id', '=', later)
        .executeTakeFirstOrThrow();
      assert.equal(left.status, 'pending', 'the scheduled send still waits for its time');
    });
  });
}
