/**
 * A scheduled send and a synchronous send of one instance meeting at the instant the scheduled one becomes due go out
 * in the order they became due or were accepted (docs/decisions/0009-sends-as-jobs.md, docs/decisions/0013-pacing.md:
 * a send never overtakes one accepted before it), each once:
 * - the scheduled send due first (its `run_at` reached, the queue's wake for it not run yet) goes before a synchronous
 *   send accepted after it. Before, the queue still counted as idle from its last drain, which had left the
 *   scheduled send for later: the synchronous send was relayed at once, ahead of it;
 * - a synchronous send relayed at once, still under way when the scheduled send becomes due, goes first: the queue
 *   claims nothing while it runs. Before, the queue's wake relayed the scheduled send beside it, and the later send
 *   could reach the platform first.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KyselyPlugin } from 'kysely';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/** How far ahead the scheduled send is due: its wake timer never fires during a test, the tests stand in for it. */
const AHEAD = 600_000;

/**
 * Time for a relay that must not happen to happen if it would: the queue's next pass is a few statements and one turn
 * of the event loop away. Only used to see that nothing more happens; every positive wait uses `eventually`.
 */
const aWhile = () => new Promise((resolve) => setTimeout(resolve, 100));

for (const dialect of testDialects()) {
  describe(`a synchronous send meeting a scheduled one as it becomes due keeps the order [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    let session: EngineSession;
    /** What the platform saw, in order: `start <id>` when a relay began, `end <id>` when it was acknowledged. */
    const seen: string[] = [];
    /** Relays of these ids wait for {@link release} before they are acknowledged. */
    const slow = new Set<string>();
    let release: () => void = () => undefined;
    /** How many times a drain read the instance's first pending job: what it does last when it can claim nothing. */
    let firstReads = 0;
    const reading = new WeakSet<object>();
    const counting: KyselyPlugin = {
      transformQuery({ node, queryId }) {
        if (node.kind === 'SelectQueryNode' && JSON.stringify(node).includes('"not_before"'))
          reading.add(queryId);
        return node;
      },
      async transformResult({ result, queryId }) {
        if (reading.has(queryId)) firstReads += 1;
        return result;
      },
    };
    /** Resolves once a drain begun after `reads` reads has read the first pending job, and its turn ended. */
    const drained = async (reads: number) => {
      await eventually('the drain to end', () => firstReads > reads);
      await new Promise((resolve) => setImmediate(resolve));
    };
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

    /** Stores a queued send `id` scheduled `AHEAD` ms from now and lets the queue see it, as the API does. */
    const schedule = async (id: string) => {
      const at = t.clock() + AHEAD;
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        runAt: at,
        sendAt: at,
      });
      const reads = firstReads;
      queue.wake(t.instance.id);
      await drained(reads);
      return at;
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      session = fakeSession(async (message: OutgoingMessage) => {
        const id = message.id ?? '';
        seen.push(`start ${id}`);
        if (slow.has(id))
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        seen.push(`end ${id}`);
        return { id, timestamp: t.clock() };
      });
      queue = testQueue(t.clock, t.services.store.db.withPlugin(counting), t.instance.id, session);
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'DUE-WARM-UP');
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('a scheduled send due before a synchronous send arrives goes first, each once', async () => {
      const at = await schedule('3EB0DUE000000000000SA');
      // Its time comes; the wake set for it has not run yet when a synchronous send arrives.
      t.clock.set(at);
      seen.length = 0;
      const sync = textJob(t.instance.id, '3EB0DUE000000000000SB', 'sync', t.clock());
      const wait = await queue.storeSync(session, sync);
      assert.equal((await row(sync.id)).status, 'pending', 'stored for its turn, not claimed at once');
      assert.equal((await wait()).id, sync.id);
      await eventually('both sent', async () => (await row('3EB0DUE000000000000SA')).status === 'sent');
      assert.deepEqual(seen, [
        'start 3EB0DUE000000000000SA',
        'end 3EB0DUE000000000000SA',
        'start 3EB0DUE000000000000SB',
        'end 3EB0DUE000000000000SB',
      ]);
      assert.deepEqual(await row('3EB0DUE000000000000SA'), { status: 'sent', attempts: 1 });
      assert.deepEqual(await row(sync.id), { status: 'sent', attempts: 1 });
    });

    it('a synchronous send relayed at once goes first when a scheduled one becomes due during its relay', async () => {
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'DUE-IDLE');
      const at = await schedule('3EB0DUE000000000000SC');
      // One millisecond before the scheduled send is due, a synchronous send is relayed at once, slowly (an upload).
      t.clock.set(at - 1);
      seen.length = 0;
      slow.add('3EB0DUE000000000000SD');
      const sync = textJob(t.instance.id, '3EB0DUE000000000000SD', 'sync', t.clock());
      const answer = (await queue.storeSync(session, sync))();
      await eventually('the synchronous relay under way', () => seen.includes('start 3EB0DUE000000000000SD'));
      assert.equal((await row(sync.id)).status, 'sending', 'relayed at once');
      // The scheduled send becomes due and its wake runs, while that relay goes on.
      t.clock.set(at);
      queue.wake(t.instance.id);
      await aWhile();
      assert.deepEqual(seen, ['start 3EB0DUE000000000000SD'], 'nothing relayed beside it');
      assert.equal((await row('3EB0DUE000000000000SC')).status, 'pending');
      release();
      assert.equal((await answer).id, sync.id);
      await eventually(
        'the scheduled send sent',
        async () => (await row('3EB0DUE000000000000SC')).status === 'sent',
      );
      assert.deepEqual(seen, [
        'start 3EB0DUE000000000000SD',
        'end 3EB0DUE000000000000SD',
        'start 3EB0DUE000000000000SC',
        'end 3EB0DUE000000000000SC',
      ]);
      assert.deepEqual(await row('3EB0DUE000000000000SC'), { status: 'sent', attempts: 1 });
      assert.deepEqual(await row(sync.id), { status: 'sent', attempts: 1 });
    });
  });
}
