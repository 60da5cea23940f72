/**
 * An instance's queued sends go out in acceptance order, also across a relay that failed and is tried again
 * (docs/decisions/0009-sends-as-jobs.md, docs/decisions/0013-pacing.md): the job keeps its place (`run_at`, then
 * `seq`) and waits for its retry there (`not_before`, migration 0029), and the jobs accepted after it, to its chat or
 * another, wait behind it; a synchronous send does not relay at once past it either. Before, the retry time was
 * written over `run_at`: after the platform's rate-overlimit pause the refused message went out last, and after a
 * dropped connection the later messages went out first. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is
 * set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KyselyPlugin } from 'kysely';
import { DomainError } from '../../src/domain/errors.ts';
import type { SentMessage } from '../../src/domain/messages.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/** A chat other than the one {@link textJob} sends to. */
const OTHER_CHAT = '5511966665555@s.whatsapp.net';

for (const dialect of testDialects()) {
  describe(`queued sends keep acceptance order across a failed relay [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    let session: EngineSession;
    const relayed: string[] = [];
    let refuse: DomainError | undefined;
    /**
     * How many times the queue read the instance's first pending job: what a drain does last when it can claim
     * nothing (src/sends/drain.ts), so the drain has ended a turn after it.
     */
    let firstReads = 0;
    /** The queries that read the first pending job: the only select of `send_jobs` naming `not_before`. */
    const reading = new WeakSet<object>();
    /** Called once, as the next read of the first pending job is sent. */
    let onFirstRead: (() => void) | undefined;
    const counting: KyselyPlugin = {
      transformQuery({ node, queryId }) {
        if (node.kind === 'SelectQueryNode' && JSON.stringify(node).includes('"not_before"')) {
          reading.add(queryId);
          const call = onFirstRead;
          onFirstRead = undefined;
          call?.();
        }
        return node;
      },
      async transformResult({ result, queryId }) {
        if (reading.has(queryId)) firstReads += 1;
        return result;
      },
    };

    const add = (id: string, chat?: string) => {
      const job = textJob(t.instance.id, id, 'async', t.clock());
      return insertSendJob(t.services.store.db, chat === undefined ? job : { ...job, chat });
    };
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'not_before', 'attempts', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /**
     * Resolves once a drain has ended with nothing it could claim since `firstReads` was `reads`, or once `relayed`
     * grew past `relays`.
     */
    const drained = async (reads: number, relays: number) => {
      await eventually('the drain to end', () => firstReads > reads || relayed.length > relays);
      await new Promise((resolve) => setImmediate(resolve));
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      session = fakeSession(async (message): Promise<SentMessage> => {
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      queue = testQueue(t.clock, t.services.store.db.withPlugin(counting), t.instance.id, session);
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it("the platform's rate-overlimit: the refused job keeps its place, first when the pause ends", async () => {
      for (const id of ['3EB0ORDER0000000000A1', '3EB0ORDER0000000000B1', '3EB0ORDER0000000000C1'])
        await add(id);
      refuse = new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 30 });
      queue.wake(t.instance.id);
      await eventually('the pause', async () => (await queue.pause(t.instance.id)) !== null);
      assert.equal((await row('3EB0ORDER0000000000A1')).status, 'pending');
      t.clock.advance(30_000);
      const reads = firstReads;
      queue.wake(t.instance.id);
      await eventually('all three sent', () => relayed.length === 3);
      assert.deepEqual(relayed, ['3EB0ORDER0000000000A1', '3EB0ORDER0000000000B1', '3EB0ORDER0000000000C1']);
      await drained(reads, 3);
      const sent = await row('3EB0ORDER0000000000A1');
      assert.deepEqual(
        [Number(sent.run_at), Number(sent.not_before), sent.attempts],
        [T0, T0 + 30_000, 2],
        'its place kept, its retry at the pause end, both relays counted',
      );
    });

    it('a dropped connection: the later jobs, to any chat, and a synchronous send wait for the retry', async () => {
      relayed.length = 0;
      const at = t.clock();
      refuse = new DomainError('platform_unreachable', 'the platform could not be reached');
      let reads = firstReads;
      await add('3EB0ORDER0000000000A2');
      await add('3EB0ORDER0000000000B2');
      await add('3EB0ORDER0000000000C2', OTHER_CHAT);
      queue.wake(t.instance.id);
      await drained(reads, 0);
      assert.deepEqual(relayed, [], 'nothing passes the job waiting for its retry');
      const held = await row('3EB0ORDER0000000000A2');
      assert.deepEqual(
        [held.status, Number(held.run_at), Number(held.not_before), held.attempts],
        ['pending', at, at + 1_000, 1],
        'its place kept, its retry in 1 s',
      );

      // A synchronous send accepted now is stored to wait its turn, not relayed at once past the waiting job.
      const sync = textJob(t.instance.id, '3EB0ORDER0000000000S2', 'sync', t.clock());
      const wait = await queue.storeSync(session, sync);
      assert.equal((await row(sync.id)).status, 'pending', 'stored to wait its turn');
      reads = firstReads;
      const answered = wait();
      await drained(reads, 0);
      assert.deepEqual(relayed, [], 'still nothing relayed before the retry');

      t.clock.advance(1_000);
      queue.wake(t.instance.id);
      assert.equal((await answered).id, sync.id);
      assert.deepEqual(relayed, [
        '3EB0ORDER0000000000A2',
        '3EB0ORDER0000000000B2',
        '3EB0ORDER0000000000C2',
        '3EB0ORDER0000000000S2',
      ]);
      const sent = await row('3EB0ORDER0000000000A2');
      assert.deepEqual([sent.status, sent.attempts], ['sent', 2]);
    });

    it('a synchronous send arriving while the drain looks past a failed relay waits for that retry too', async () => {
      // The queue is idle (a drain woken here found nothing due); then a queued job's relay fails. Woken, so the wait
      // does not hang on whether the previous test's last drain had read the queue before or after this line.
      const idleReads = firstReads;
      queue.wake(t.instance.id);
      await drained(idleReads, relayed.length);
      refuse = new DomainError('platform_unreachable', 'the platform could not be reached');
      await add('3EB0ORDER0000000000A3');
      // The synchronous request arrives after the failed relay ended, while the drain reads what is due next.
      let stored: Promise<() => Promise<SentMessage>> | undefined;
      const sync = textJob(t.instance.id, '3EB0ORDER0000000000S3', 'sync', t.clock());
      onFirstRead = () => {
        stored = queue.storeSync(session, sync);
      };
      const relays = relayed.length;
      queue.submitted(t.instance.id);
      await eventually('the synchronous send stored', () => stored !== undefined);
      const answered = (await (stored ?? Promise.reject(new Error('not stored'))))();
      assert.equal((await row(sync.id)).status, 'pending', 'stored to wait its turn, not relayed at once');
      assert.equal(relayed.length, relays, 'nothing went out before the job waiting for its retry');

      t.clock.advance(1_000);
      queue.wake(t.instance.id);
      assert.equal((await answered).id, sync.id);
      assert.deepEqual(relayed.slice(relays), ['3EB0ORDER0000000000A3', '3EB0ORDER0000000000S3']);
    });
  });
}
