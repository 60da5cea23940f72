/**
 * The pace of an instance's sends (docs/decisions/0013-pacing.md), as the send queue keeps it:
 * - `minIntervalMs` holds the synchronous sends a restriction pause lets through, as at any other time (they went
 *   out back to back exactly while the platform said "too fast");
 * - a synchronous send never overtakes a queued one accepted before it, even with no pace set (it was relayed at
 *   once while the queue's last job was still being relayed, and could finish first);
 * - a new pace counts from the last relay: a longer interval set just after a relay holds the next one (it let the
 *   next job go at once), a shorter one lets it go sooner.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, settledFlag, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const PACE = { minIntervalMs: 60_000, jitterMs: 0, newChatsPerDay: null };

/**
 * Time for a relay that should not happen to happen if it would: the queue's next pass is a few statements and one
 * turn of the event loop away. Only used to see that nothing more happens; every positive wait uses `eventually`.
 */
const aWhile = () => new Promise((resolve) => setTimeout(resolve, 100));

for (const dialect of testDialects()) {
  describe(`pacing: the send queue keeps the pace [${dialect}]`, () => {
    let t: TestApp;
    const queues: SendQueue[] = [];
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(async () => {
      for (const queue of queues) await queue.stop();
      await t.close();
    });

    /**
     * A new queue for the test instance (a fresh process: nothing relayed, nothing known) over a session relaying
     * through `send`. The instance's earlier jobs are gone and its pace is off.
     */
    const startQueue = async (send: (message: OutgoingMessage) => Promise<void>) => {
      for (const queue of queues.splice(0)) await queue.stop();
      const { db } = t.services.store;
      await db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('messages').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('send_pacing').where('instance_id', '=', t.instance.id).execute();
      t.clock.set(T0);
      const session = fakeSession(async (message) => {
        await send(message);
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      const queue = testQueue(t.clock, db, t.instance.id, session);
      queues.push(queue);
      return { queue, session };
    };
    const status = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'new_chat'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const job = (id: string, mode: 'sync' | 'async') => textJob(t.instance.id, id, mode, t.clock());
    /** Stores a synchronous send and starts its wait: `answer`, its rejection marked handled. */
    const sendSync = async (queue: SendQueue, session: EngineSession, id: string) => {
      const answer = (await queue.storeSync(session, job(id, 'sync')))();
      answer.catch(() => undefined);
      return { answer };
    };

    it('minIntervalMs holds the synchronous sends a restriction pause lets through', async () => {
      const relayed: [string, number][] = [];
      let refuse: DomainError | undefined;
      const { queue, session } = await startQueue(async (message) => {
        const error = refuse;
        refuse = undefined;
        if (error) throw error;
        relayed.push([message.id ?? '', t.clock() - T0]);
      });
      await queue.setPacing(t.instance.id, PACE);
      await (await sendSync(queue, session, 'PAUSE-S1')).answer;
      // The pace holds the next one for 60 s; then the platform answers it "too fast": the queue pauses 10 min.
      const { answer: refused } = await sendSync(queue, session, 'PAUSE-S2');
      t.clock.advance(60_000);
      refuse = new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 600 });
      queue.wake(t.instance.id);
      await assert.rejects(refused, (error: DomainError) => error.code === 'rate_limited');
      // The request hears the refusal before the pause is written.
      assert.deepEqual(
        await eventually('the pause', async () => (await queue.pause(t.instance.id)) ?? undefined),
        {
          reason: 'the platform rate-limited this account',
          until: T0 + 660_000,
        },
      );
      // Two synchronous sends during the pause: relayed to hear the platform's verdict, but one per 60 s.
      const { answer: third } = await sendSync(queue, session, 'PAUSE-S3');
      const { answer: fourth } = await sendSync(queue, session, 'PAUSE-S4');
      await third;
      await aWhile();
      assert.deepEqual(relayed, [
        ['PAUSE-S1', 0],
        ['PAUSE-S3', 60_000],
      ]);
      assert.equal(
        (await status('PAUSE-S4')).status,
        'pending',
        'held by the pace, the pause still in force',
      );
      t.clock.advance(60_000);
      queue.wake(t.instance.id);
      await fourth;
      assert.deepEqual(relayed, [
        ['PAUSE-S1', 0],
        ['PAUSE-S3', 60_000],
        ['PAUSE-S4', 120_000],
      ]);
    });

    it('a synchronous send waits for a queued one accepted before it, still being relayed, with no pace set', async () => {
      const started: string[] = [];
      const finished: string[] = [];
      let release: () => void = () => undefined;
      const upload = new Promise<void>((resolve) => {
        release = resolve;
      });
      const { queue, session } = await startQueue(async (message) => {
        const id = message.id ?? '';
        started.push(id);
        // A queued image whose upload takes a while.
        if (id === 'ORDER-Q-IMAGE') await upload;
        finished.push(id);
      });
      // Once the queue drained, a synchronous send is stored claimed and relayed at once.
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'ORDER-WARM-UP');
      await insertSendJob(t.services.store.db, job('ORDER-Q-IMAGE', 'async'));
      queue.submitted(t.instance.id);
      await eventually('the queued image on its way', () => started.includes('ORDER-Q-IMAGE'));
      const { answer: text } = await sendSync(queue, session, 'ORDER-S-TEXT');
      const answered = settledFlag(text);
      assert.equal(
        (await status('ORDER-S-TEXT')).status,
        'pending',
        'stored for its turn, not claimed at once',
      );
      await aWhile();
      assert.equal(answered(), false);
      assert.deepEqual(started.slice(-1), ['ORDER-Q-IMAGE'], 'the text waits for the image');
      release();
      await text;
      assert.deepEqual(finished.slice(-2), ['ORDER-Q-IMAGE', 'ORDER-S-TEXT']);
    });

    it('a new pace counts from the last relay: a longer interval holds the next one, a shorter lets it go', async () => {
      const relayed: [string, number][] = [];
      const { queue } = await startQueue(async (message) => {
        relayed.push([message.id ?? '', t.clock() - T0]);
      });
      await queue.setPacing(t.instance.id, PACE);
      for (const id of ['REPACE-P1', 'REPACE-P2']) await insertSendJob(t.services.store.db, job(id, 'async'));
      queue.wake(t.instance.id);
      await eventually('the first relay', () => relayed.length === 1);
      t.clock.advance(1_000);
      await queue.setPacing(t.instance.id, { ...PACE, minIntervalMs: 600_000 });
      await aWhile();
      t.clock.set(T0 + 60_000);
      queue.wake(t.instance.id);
      await aWhile();
      assert.deepEqual(relayed, [['REPACE-P1', 0]], 'the 10 min interval counts from the first relay');
      // Shorter again: 30 s after the first relay have passed, so the next goes now.
      await queue.setPacing(t.instance.id, { ...PACE, minIntervalMs: 30_000 });
      await eventually('the second relay', () => relayed.length === 2);
      assert.deepEqual(relayed, [
        ['REPACE-P1', 0],
        ['REPACE-P2', 60_000],
      ]);
    });
  });
}
