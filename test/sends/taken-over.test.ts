/**
 * A synchronous send whose relay failed after another holder took its job over (docs/decisions/0008-leases-and-fencing.md:
 * this node lost its lease while the platform answered): the finish finds the job no longer this node's, so nothing
 * is written or reported here, and the request waits for the new holder's outcome, read from the job's row, instead
 * of answering this node's error for a message the new holder may still send.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { Store } from '../../src/store/database.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import {
  fakeSession,
  settledFlag,
  storeWithFaults,
  testQueue,
  textJob,
  untilRelayedAtOnce,
} from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

/** The statement that ends a held job (`finishSendJob`: its `set` starts with the lock's release). */
const FINISH = /^update "send_jobs" set "locked_by" = (\?|\$\d+), "locked_at" = (\?|\$\d+), "updated_at"/;
/** A read of one job's row (`findSendJob`), as the failed relay makes after its finish to see who ended it. */
const READ_JOB = /^select \* from "send_jobs" where/;
/** The hand-back of the instance's `sending` jobs (`reclaimSendingJobs`: its `set` starts with the status's case). */
const HAND_BACK = /^update "send_jobs" set "status" = case/;

for (const dialect of testDialects()) {
  describe(`send queue: a relay that fails after its job was taken over [${dialect}]`, () => {
    let t: TestApp;
    let store: Store;
    let queue: SendQueue;
    let finishes = 0;
    let jobReads = 0;
    let handBacks = 0;
    const reports: SendStatusReport[] = [];
    /** Holds the relay of this job id until released; then the platform refuses it. */
    let gate: { id: string; started: boolean; released: Promise<void> } | undefined;

    const session = fakeSession(async (message) => {
      if (gate && gate.id === message.id && !gate.started) {
        gate.started = true;
        await gate.released;
        throw new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      }
      return { id: message.id ?? '', timestamp: t.clock() };
    });

    /** Another node's relay ends the job: `sent` at `at`, or `failed`. */
    const otherNodeEnds = (id: string, status: 'sent' | 'failed', at: number) =>
      t.services.store.db
        .updateTable('send_jobs')
        .set({
          status,
          locked_by: null,
          locked_at: null,
          sent_at: status === 'sent' ? at : null,
          updated_at: at,
        })
        .where('id', '=', id)
        .execute();

    /**
     * A synchronous send relayed at once whose relay is held; the job is taken over by `other-node` meanwhile, then
     * `beforeRefusal` runs, then the platform refuses this node's relay. Resolves once this node's finish ran, with the request's outcome.
     */
    const refusedAfterTakeover = async (
      id: string,
      beforeRefusal: () => Promise<void> = async () => undefined,
    ) => {
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { id, started: false, released };
      const wait = await queue.storeSync(session, textJob(t.instance.id, id, 'sync', t.clock()));
      const outcome = wait();
      const settled = settledFlag(outcome);
      await eventually('the relay started', () => gate?.started);
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ locked_by: 'other-node', locked_at: t.clock() })
        .where('id', '=', id)
        .execute();
      await beforeRefusal();
      const finishesBefore = finishes;
      const readsBefore = jobReads;
      release();
      await eventually("this node's finish ran", () => finishes > finishesBefore);
      // Then the relay reads the row twice: whether its finish's answer was lost (src/sends/finish.ts), and whether
      // the job ended sent (src/sends/failures.ts `settleTaken`), which starts the follow; from that answer on it
      // lets the job go with no more I/O, so this check, run from a timer, finds the job no longer held here. A
      // login before that would find the job still held by this relay and leave it (the second test's login is a
      // later one).
      await eventually('the relay read the job twice', () => jobReads >= readsBefore + 2);
      return { outcome, settled };
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const lostAnswers = (sql: string) => {
        if (FINISH.test(sql)) finishes += 1;
        if (READ_JOB.test(sql)) jobReads += 1;
        if (HAND_BACK.test(sql)) handBacks += 1;
      };
      store = await storeWithFaults(t, { lostAnswers });
      queue = testQueue(t.clock, store.db, t.instance.id, session, async (_instanceId, report) => {
        reports.push(report);
      });
      queue.wake(t.instance.id);
      // A first send: the queue has drained once and relays the next ones at once.
      const first = await queue.storeSync(
        session,
        textJob(t.instance.id, '3EB0TAKEN0000000000000', 'sync', t.clock()),
      );
      await first();
    });
    after(async () => {
      await queue.stop();
      await store.destroy();
      await t.close();
    });

    it("answers the new holder's sent outcome, not this node's refusal, and writes or reports nothing", async () => {
      const id = '3EB0TAKEN0000000000001';
      const { outcome, settled } = await refusedAfterTakeover(id);
      assert.equal(settled(), false, 'the request waits for the new holder');
      const row = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'locked_by', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        row,
        { status: 'sending', locked_by: 'other-node', last_error: null },
        'left to its holder',
      );
      await otherNodeEnds(id, 'sent', T0 + 5_000);
      assert.deepEqual(await outcome, { id, timestamp: T0 + 5_000 });
      assert.deepEqual(
        reports.filter((report) => report.kind === 'message' && report.id === id),
        [],
        'the new holder reports its own outcome',
      );
    });

    it('a later login here hands back a followed job whose new holder died, relays it once, and the request answers', async () => {
      const id = '3EB0TAKEN0000000000003';
      const { outcome, settled } = await refusedAfterTakeover(id);
      assert.equal(settled(), false, 'the request waits for the new holder');
      // The new holder died with the job `sending`; the instance comes back here and logs in.
      queue.afterCommit(t.instance.id, {
        type: 'connection',
        state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
      });
      await eventually('the request answered', () => settled());
      assert.equal((await outcome).id, id, 'relayed by the hand-back, answered from the row');
      const row = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'sent', attempts: 2, locked_by: null });
    });

    it('a login committed while the relay still held the taken-over job hands it back once the relay let it go', async () => {
      const id = '3EB0TAKEN0000000000005';
      // The relay must run at once, outside the queue's drain, for the login's hand-back to run during it: the drain
      // the last test's login started is over once a probe is relayed at once.
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, '3EB0TAKENPROBE');
      const { outcome, settled } = await refusedAfterTakeover(id, async () => {
        // The new holder died and the instance came back here while this node's relay still ran: the login's
        // hand-back leaves the job, which that relay holds.
        const before = handBacks;
        queue.afterCommit(t.instance.id, {
          type: 'connection',
          state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
        });
        await eventually("the login's hand-back ran", () => handBacks > before);
        const row = await t.services.store.db
          .selectFrom('send_jobs')
          .select(['status', 'locked_by'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(row, { status: 'sending', locked_by: 'other-node' }, 'left while held');
      });
      // The refused relay let the job go unwritten: it is handed back and relayed again here, without another login,
      // and the request answers the message sent (not 504 at its deadline).
      await eventually('the request answered', () => settled());
      assert.deepEqual(await outcome, { id, timestamp: t.clock() });
      const row = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'sent', attempts: 2, locked_by: null });
    });

    it('answers 504 with the outcome unknown when the new holder has not ended the job 60 s after it was accepted', async () => {
      const id = '3EB0TAKEN0000000000004';
      const { outcome, settled } = await refusedAfterTakeover(id);
      assert.equal(settled(), false, 'the request waits for the new holder');
      t.clock.advance(60_000);
      await assert.rejects(outcome, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual(
          [error.code, error.message],
          [
            'timeout',
            `the message's relay has not ended and its outcome is not known; GET /v1/messages/${id} shows it`,
          ],
        );
        return true;
      });
      // Left to its holder.
      await otherNodeEnds(id, 'sent', t.clock());
    });

    it("answers the new holder's failure as a conflict", async () => {
      const id = '3EB0TAKEN0000000000002';
      const { outcome, settled } = await refusedAfterTakeover(id);
      assert.equal(settled(), false, 'the request waits for the new holder');
      await otherNodeEnds(id, 'failed', T0 + 6_000);
      await assert.rejects(outcome, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual([error.code, error.message], ['conflict', 'message already failed']);
        return true;
      });
    });
  });
}
