/**
 * A send job whose relay is interrupted again and again (docs/decisions/0009-sends-as-jobs.md): a message whose relay
 * kills its process (a poison message) leaves its job `sending` at each crash, and the instance's next holder hands it
 * back. Attempts are counted at each claim (Graphile Worker's model) and a job whose attempts reached `max_attempts`
 * is not claimed again: the hand-back fails it with its reason, reported as any failed job's outcome, and the jobs
 * behind it go on. A pace hold gives its claim's attempt back, and a synchronous job gets more than one claim, so a
 * job handed back without a relay of its own is not failed for it. A node's crash is simulated as in
 * test/sends/logout-in-flight.test.ts: its relay never returns, its queue stops, and a queue of another node takes
 * the instance over.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { SYNC_MAX_ATTEMPTS } from '../../src/app/messaging.ts';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import {
  claimNextSendJob,
  holdBackSendJob,
  RELAY_ATTEMPTS_INTERRUPTED,
  reclaimSendingJobs,
} from '../../src/store/send-job-claims.ts';
import { findSendJob, insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-03T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`send jobs whose relay is interrupted again and again [${dialect}]`, () => {
    let t: TestApp;
    const reports: SendStatusReport[] = [];
    const relayed: string[] = [];
    /** Jobs whose relay kills its process: it never returns. */
    const poison = new Set<string>();
    /** How often each poison job's relay started. */
    const starts = new Map<string, number>();
    /** The queues made by a test, stopped after it. */
    const queues: SendQueue[] = [];

    const row = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const startsOf = (id: string) => starts.get(id) ?? 0;

    /** A queue of node `nodeId` (a process that takes the instance over) whose session honours {@link poison}. */
    const queueOf = (nodeId: string): SendQueue => {
      const session: EngineSession = fakeSession(async (message) => {
        const id = message.id ?? '';
        if (poison.has(id)) {
          starts.set(id, startsOf(id) + 1);
          // The process dies here: the relay never returns.
          await new Promise<never>(() => undefined);
        }
        relayed.push(id);
        return { id, timestamp: t.clock() };
      });
      const report = async (_instanceId: string, report: SendStatusReport) => {
        reports.push(report);
      };
      const queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, report, { nodeId });
      queues.push(queue);
      return queue;
    };

    /**
     * Node `nodeId` takes the instance over (handing back what the last one left `sending`), claims job `id` and dies
     * in its relay: the job stays `sending`, held by `nodeId`. The clock then moves on a second (the restart).
     */
    const crashesRelaying = async (nodeId: string, id: string) => {
      const before = startsOf(id);
      const queue = queueOf(nodeId);
      queue.wake(t.instance.id);
      await eventually(`${nodeId} relaying ${id}`, () => startsOf(id) > before);
      // Nothing more from this node: it claims nothing after its stop, and its relay never ends.
      await queue.stop(10);
      t.clock.advance(1_000);
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
    });
    beforeEach(() => {
      reports.length = 0;
      relayed.length = 0;
    });
    afterEach(async () => {
      for (const queue of queues.splice(0)) await queue.stop(10);
      // Whatever a test left live (a poison job still relayed, when it failed) does not hold up the next test's jobs.
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ status: 'canceled', locked_by: null, locked_at: null })
        .where('status', 'in', ['pending', 'sending'])
        .execute();
    });
    after(() => t.close());

    it('a queued job whose relay kills its process is failed at the hand-back once its attempts are used up, and the job behind it goes out', async () => {
      const id = '3EB0POISONQUEUED000001';
      const behind = '3EB0POISONBEHIND000001';
      poison.add(id);
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        maxAttempts: 3,
      });
      await insertSendJob(t.services.store.db, textJob(t.instance.id, behind, 'async', t.clock()));
      for (let attempt = 1; attempt <= 3; attempt += 1) {
        await crashesRelaying(`node-${attempt}`, id);
        assert.deepEqual(
          await row(id),
          { status: 'sending', attempts: attempt, locked_by: `node-${attempt}`, last_error: null },
          `attempt ${attempt} counted at its claim`,
        );
        assert.equal((await row(behind)).status, 'pending', 'the job behind waits for it (acceptance order)');
      }

      // The next holder finds its last attempt interrupted too.
      const next = queueOf('node-4');
      next.wake(t.instance.id);
      await eventually(
        'the job failed, or relayed a fourth time',
        async () => startsOf(id) > 3 || (await row(id)).status === 'failed',
      );
      assert.equal(startsOf(id), 3, 'not relayed past its max_attempts');
      assert.deepEqual(await row(id), {
        status: 'failed',
        attempts: 3,
        locked_by: null,
        last_error: RELAY_ATTEMPTS_INTERRUPTED,
      });
      await eventually('the job behind sent', async () => (await row(behind)).status === 'sent');
      assert.deepEqual(relayed, [behind]);
      // Its outcome as any queued send's failure: a `MessageStatus failed` event with the reason.
      await eventually('both reports', () => reports.length >= 2);
      assert.deepEqual(reports, [
        { kind: 'message', id, status: 'failed', error: RELAY_ATTEMPTS_INTERRUPTED, at: t.clock() },
        { kind: 'message', id: behind, status: 'sent', at: t.clock() },
      ]);
    });

    it('a synchronous job whose relay kills its process is failed by its next holder, and a request waiting there answers it', async () => {
      const id = '3EB0POISONSYNC00000001';
      poison.add(id);
      await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'sync', t.clock()));
      for (let attempt = 1; attempt <= SYNC_MAX_ATTEMPTS; attempt += 1)
        await crashesRelaying(`sync-node-${attempt}`, id);
      assert.equal((await row(id)).attempts, SYNC_MAX_ATTEMPTS);

      // The request, forwarded again to the instance's next holder, waits there for the job.
      const next = queueOf(`sync-node-${SYNC_MAX_ATTEMPTS + 1}`);
      const job = await findSendJob(t.services.store.db, t.instance.id, id);
      assert.ok(job);
      const answer = next.waitForStored(job);
      answer.catch(() => undefined);
      next.wake(t.instance.id);
      await eventually(
        'the job failed, or relayed again',
        async () => startsOf(id) > SYNC_MAX_ATTEMPTS || (await row(id)).status === 'failed',
      );
      assert.equal(startsOf(id), SYNC_MAX_ATTEMPTS, 'not relayed past its max_attempts');
      await assert.rejects(answer, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.deepEqual([error.code, error.message], ['conflict', 'message already failed']);
        return true;
      });
      assert.deepEqual(await row(id), {
        status: 'failed',
        attempts: SYNC_MAX_ATTEMPTS,
        locked_by: null,
        last_error: RELAY_ATTEMPTS_INTERRUPTED,
      });
      // The request carried the outcome: no event for it.
      assert.deepEqual(reports, []);
    });

    it('a synchronous job its process stored claimed and died before relaying is relayed by the next holder, not failed', async () => {
      const id = '3EB0CLAIMEDNEVERSENT01';
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'sync', t.clock()),
        claimedBy: 'a-dead-node',
      });
      const next = queueOf('node-after-a-crash');
      next.wake(t.instance.id);
      await eventually('the job sent', async () => (await row(id)).status === 'sent');
      assert.deepEqual(relayed, [id]);
      assert.equal((await row(id)).attempts, 2);
      await eventually('its report', () => reports.length > 0);
      assert.deepEqual(reports, [{ kind: 'message', id, status: 'sent', at: t.clock() }]);
    });

    it("the store fails a handed-back job only once its relays' claims reach max_attempts: pace holds gave theirs back", async () => {
      const db = t.services.store.db;
      const id = '3EB0PACEDTHENCRASHED01';
      await insertSendJob(db, { ...textJob(t.instance.id, id, 'async', t.clock()), maxAttempts: 2 });
      // Claimed five times and held each time by the pace before its relay: no attempt used.
      for (let hold = 0; hold < 5; hold += 1) {
        const claimed = await claimNextSendJob(db, t.instance.id, 'node-x', t.clock());
        assert.equal(claimed?.id, id);
        const at = t.clock();
        const until = at + 1_000;
        const held = await holdBackSendJob(db, t.instance.id, id, 'node-x', {
          at,
          until,
          error: 'the new-chats-per-day pace',
          waits: 'moved',
          unrelayed: true,
        });
        assert.equal(held, 'pending');
        t.clock.set(until);
      }
      assert.equal((await row(id)).attempts, 0);
      // A relay interrupted: handed back with an attempt left.
      assert.equal((await claimNextSendJob(db, t.instance.id, 'node-x', t.clock()))?.attempts, 1);
      assert.equal((await reclaimSendingJobs(db, t.instance.id, t.clock())).handed, 1);
      assert.deepEqual(await row(id), {
        status: 'pending',
        attempts: 1,
        locked_by: null,
        last_error: 'the new-chats-per-day pace',
      });
      // Its last attempt interrupted too: failed, not handed back, and never claimed again.
      assert.equal((await claimNextSendJob(db, t.instance.id, 'node-x', t.clock()))?.attempts, 2);
      const reclaimed = await reclaimSendingJobs(db, t.instance.id, t.clock());
      assert.deepEqual(await row(id), {
        status: 'failed',
        attempts: 2,
        locked_by: null,
        last_error: RELAY_ATTEMPTS_INTERRUPTED,
      });
      assert.deepEqual(reclaimed, { handed: 0, canceled: [], failed: [id], sent: [] });
      assert.equal(await claimNextSendJob(db, t.instance.id, 'node-x', t.clock()), undefined);
    });
  });
}
