/**
 * A synchronous send relayed at once whose outcome's write fails on the store otherwise than by an outage (an error
 * the relay does not wait out, src/sends/relay.ts) answers that error, and its job, left `sending` with no relay of
 * it, is handed back by the queue before its next claim, as after a drain's failure (docs/decisions/0009-sends-as-jobs.md):
 * it is relayed again under its id and ends `sent`. Before, it stayed `sending` until the instance's next login.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, storeWithFaults, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/**
 * How far the queue's due clock runs ahead of its business clock, ms: a drain's claim is told from a job stored
 * claimed.
 */
const DUE_AHEAD_MS = 7;

for (const dialect of testDialects()) {
  describe(`an immediate relay whose outcome's write fails on the store [${dialect}]`, () => {
    let t: TestApp;
    let store: Store;
    let queue: SendQueue;
    /** While set, the next write ending a held job (`finishSendJob`) fails with an error nobody waits out. */
    let breakFinish = false;
    const relayed: string[] = [];
    const reports: SendStatusReport[] = [];
    /** Holds the first relay of this job id until released. */
    let gate: { id: string; started: () => void; released: Promise<void> } | undefined;
    const session = fakeSession(async (message) => {
      relayed.push(message.id ?? '');
      const held = gate;
      if (held !== undefined && held.id === message.id) {
        gate = undefined;
        held.started();
        await held.released;
      }
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    /**
     * Stores synchronous sends under ids `<prefix>NNNNNN` until one is stored claimed, to be relayed at once; one the
     * queue took in its turn (a drain still ending its pass claims it as soon as it is stored) is waited for, and the
     * next is sent 20 ms later. The two are told apart by the claim's time: a job stored claimed is locked at its
     * acceptance (the business clock), a drain's claim at the queue's due clock, {@link DUE_AHEAD_MS} ahead.
     */
    const storedClaimed = (prefix: string): Promise<{ id: string; wait: () => Promise<unknown> }> => {
      let tries = 0;
      return eventually('a send relayed at once', async () => {
        tries += 1;
        const id = `${prefix}${String(tries).padStart(6, '0')}`;
        t.clock.advance(1);
        const wait = await queue.storeSync(session, textJob(t.instance.id, id, 'sync', t.clock()));
        const stored = await store.db
          .selectFrom('send_jobs')
          .select(['status', 'locked_at', 'created_at'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        if (stored.status === 'sending' && Number(stored.locked_at) === Number(stored.created_at))
          return { id, wait };
        await wait();
        return undefined;
      });
    };

    /** The job's row once it ended (`sent` or `failed`). */
    const ended = (id: string) =>
      eventually(`job ${id} ended`, async () => {
        const found = await store.db
          .selectFrom('send_jobs')
          .select(['status', 'attempts', 'locked_by'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return found.status === 'sent' || found.status === 'failed' ? found : undefined;
      });

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      store = await storeWithFaults(t, {
        faults: (sql) => {
          if (
            breakFinish &&
            /^update "send_jobs" set "locked_by" = (\?|\$\d+), "locked_at" = (\?|\$\d+), "updated_at" = (\?|\$\d+), "status"/.test(
              sql,
            )
          ) {
            breakFinish = false;
            throw new Error('disk image is malformed');
          }
        },
      });
      queue = testQueue(
        t.clock,
        store.db,
        t.instance.id,
        session,
        async (_instanceId, report) => {
          reports.push(report);
        },
        { storeClock: () => t.clock() + DUE_AHEAD_MS },
      );
      queue.wake(t.instance.id);
      await untilRelayedAtOnce(queue, session, store.db, t.instance.id, t.clock, 'BROKEN-WARM-UP');
    });
    after(async () => {
      await queue.stop();
      await store.destroy();
      await t.close();
    });

    it('answers the error, then the queue hands the job back and relays it again under its id', async () => {
      // A send stored claimed is relayed at once when its wait is called; one the queue took in its turn (a drain of
      // the warm-up still running) is waited for, and another is sent.
      const { id, wait } = await storedClaimed('3EB0BROKENWRITE');
      breakFinish = true;
      await assert.rejects(wait(), /disk image is malformed/);
      assert.equal(breakFinish, false, 'the write failed');
      const row = await eventually('the job relayed again and ended', async () => {
        const found = await store.db
          .selectFrom('send_jobs')
          .select(['status', 'attempts', 'locked_by'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        // Handed back it is `pending` until the queue's claim; ended, `sent` (or `failed`, which the assertion shows).
        return found.status === 'sent' || found.status === 'failed' ? found : undefined;
      });
      assert.deepEqual([row.status, row.attempts, row.locked_by], ['sent', 2, null]);
      assert.deepEqual(
        relayed.filter((each) => each === id),
        [id, id],
        'relayed again under its id',
      );
      // The request answered the error: the outcome of the relay again reaches the client as its event.
      assert.deepEqual(
        reports
          .filter((report) => report.kind === 'message' && report.id === id)
          .map((report) => report.status),
        ['sent'],
        "the relay again's outcome recorded as its event",
      );
    });

    it('relays the job again before a send queued behind it while it was relayed', async () => {
      let started = (): void => undefined;
      let release = (): void => undefined;
      const relaying = new Promise<void>((resolve) => {
        started = resolve;
      });
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      const { id, wait } = await storedClaimed('3EB0BROKENFIRST');
      gate = { id, started, released };
      const outcome = wait();
      outcome.catch(() => undefined);
      await relaying;
      // Queued while the relay at once is under way: the drain holds its claim back until that relay ended.
      const behind = '3EB0BROKENBEHIND000001';
      t.clock.advance(1);
      assert.equal(await queue.store(textJob(t.instance.id, behind, 'async', t.clock())), 'stored');
      queue.submitted(t.instance.id);
      breakFinish = true;
      release();
      await assert.rejects(outcome, /disk image is malformed/);
      assert.equal(breakFinish, false, 'the write failed');
      const first = await ended(id);
      const second = await ended(behind);
      assert.deepEqual([first.status, first.attempts, second.status], ['sent', 2, 'sent']);
      assert.deepEqual(
        relayed.filter((each) => each === id || each === behind),
        [id, id, behind],
        'the job left sending goes out again first, in its place',
      );
    });
  });
}
