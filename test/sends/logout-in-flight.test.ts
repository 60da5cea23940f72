import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineEvent } from '../../src/domain/events.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

/**
 * A logout finds some of the account's jobs being relayed (docs/decisions/0074-logout-cancels-pending-sends.md): it
 * cannot cancel them then, so it marks them, and whatever would make one `pending` again (its relay holding it back
 * after a transient failure, or a new holder handing back a job a dead node left `sending`) cancels it instead, with
 * its `MessageStatus canceled`: none goes out from the account linked to the instance next.
 */

const T0 = Date.parse('2026-04-02T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`send jobs being relayed when the account logs out [${dialect}]`, () => {
    let t: TestApp;
    const reports: SendStatusReport[] = [];
    const relayed: string[] = [];
    /** Holds the relay of this job id until released, then fails it with `error` (when set). */
    let gate: { id: string; started: boolean; released: Promise<void>; error?: DomainError } | undefined;
    let queue: SendQueue;

    const row = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by', 'logged_out_at', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** The account's logout, recorded as the recorder records it: the queue's derivation in one transaction. */
    const logout = (at: number) =>
      t.services.store.db.transaction().execute(async (trx) => {
        const event: EngineEvent = { type: 'sessionStatus', status: 'logged_out', at };
        return queue.derive(trx, t.instance.id, event);
      });
    /** A gate on job `id`'s relay and its release. */
    const hold = (id: string, error?: DomainError) => {
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { id, started: false, released, ...(error ? { error } : {}) };
      return release;
    };

    /** A queue of node `nodeId` relaying through a session that honours {@link gate}; its reports in `reports`. */
    const queueOf = (nodeId: string): SendQueue => {
      const session: EngineSession = fakeSession(async (message) => {
        const current = gate;
        if (current && current.id === message.id && !current.started) {
          current.started = true;
          await current.released;
          if (current.error) throw current.error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      const report = async (_instanceId: string, report: SendStatusReport) => {
        reports.push(report);
      };
      return testQueue(t.clock, t.services.store.db, t.instance.id, session, report, { nodeId });
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
    });
    beforeEach(() => {
      reports.length = 0;
      relayed.length = 0;
      gate = undefined;
    });
    afterEach(() => queue.stop());
    after(() => t.close());

    it('a queued job whose relay fails transiently after the logout is canceled, not held back for the next account', async () => {
      queue = queueOf('this-node');
      const id = '3EB0LOGOUTHELDBACK0001';
      const release = hold(id, new DomainError('not_logged_in', 'the session is not logged in'));
      await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', t.clock()));
      queue.wake(t.instance.id);
      await eventually('the relay under way', () => gate?.started);

      t.clock.advance(1_000);
      assert.deepEqual(await logout(t.clock()), [], 'nothing pending to cancel at the logout');
      const marked = await row(id);
      assert.deepEqual(
        [marked.status, Number(marked.logged_out_at)],
        ['sending', t.clock()],
        'left to its relay, marked',
      );

      t.clock.advance(1_000);
      release();
      await eventually('the relay ended', async () => (await row(id)).status !== 'sending');
      const ended = await row(id);
      assert.deepEqual(
        [ended.status, ended.locked_by, ended.last_error],
        ['canceled', null, 'the session is not logged in'],
      );
      // The report follows the job's write (its transaction commits first).
      await eventually('the canceled report', () => reports.length > 0);
      assert.deepEqual(reports, [{ kind: 'message', id, status: 'canceled', at: t.clock() }]);
      // Later drains (the next account linked) find nothing to relay.
      t.clock.advance(120_000);
      queue.wake(t.instance.id);
      await queue.stop();
      assert.deepEqual(relayed, []);
      assert.equal((await row(id)).status, 'canceled');
    });

    it('a job a dead node left sending when the account logged out is canceled by the next holder, not relayed', async () => {
      queue = queueOf('this-node');
      const id = '3EB0LOGOUTDEADNODE0001';
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'sync', t.clock()),
        claimedBy: 'a-dead-node',
      });
      const pending = '3EB0LOGOUTPENDING00001';
      await insertSendJob(t.services.store.db, textJob(t.instance.id, pending, 'async', t.clock()));
      t.clock.advance(1_000);
      // The logout cancels the pending job at once and marks the one being relayed.
      assert.deepEqual(await logout(t.clock()), [
        { type: 'messageStatus', id: pending, status: 'canceled', at: t.clock() },
      ]);
      assert.equal((await row(id)).status, 'sending');

      // A new holder (after a new link, whichever account) hands back what the dead node held.
      t.clock.advance(1_000);
      await queue.stop();
      queue = queueOf('new-holder');
      queue.wake(t.instance.id);
      await eventually('the job canceled', async () => (await row(id)).status === 'canceled');
      await eventually('the canceled report', () => reports.length > 0);
      assert.deepEqual(reports, [{ kind: 'message', id, status: 'canceled', at: t.clock() }]);
      // A job accepted for the account linked now is relayed as before.
      const next = '3EB0LOGOUTNEXTACCOUNT1';
      await insertSendJob(t.services.store.db, textJob(t.instance.id, next, 'async', t.clock()));
      queue.wake(t.instance.id);
      await eventually('the next account sends', async () => (await row(next)).status === 'sent');
      assert.deepEqual(relayed, [next]);
    });

    it('a stalled relay whose job the next holder canceled does not report canceled a second time', async () => {
      queue = queueOf('node-a');
      const id = '3EB0LOGOUTTWICE0000001';
      const message = 'the session is not logged in';
      const release = hold(id, new DomainError('not_logged_in', message));
      await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', t.clock()));
      // An earlier try failed with the same error (held back, due again now).
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ last_error: message })
        .where('id', '=', id)
        .execute();
      queue.wake(t.instance.id);
      await eventually('the relay under way', () => gate?.started);
      t.clock.advance(1_000);
      await logout(t.clock());
      // node-a stalls; node-b holds the instance now and hands back what node-a left sending: canceled.
      t.clock.advance(1_000);
      const b = queueOf('node-b');
      b.wake(t.instance.id);
      await eventually('canceled by node-b', async () => (await row(id)).status === 'canceled');
      await b.stop();
      // node-a resumes: its relay fails on the closed session, and its hold-back finds the job no longer its own.
      t.clock.advance(1_000);
      release();
      await queue.stop();
      assert.deepEqual(reports, [{ kind: 'message', id, status: 'canceled', at: t.clock() - 1_000 }]);
    });

    it('a job the logout marked whose relay went through stays sent', async () => {
      queue = queueOf('new-holder');
      const id = '3EB0LOGOUTRELAYSENT001';
      const release = hold(id);
      await insertSendJob(t.services.store.db, textJob(t.instance.id, id, 'async', t.clock()));
      queue.wake(t.instance.id);
      await eventually('the relay under way', () => gate?.started);
      await logout(t.clock());
      release();
      await eventually('the job sent', async () => (await row(id)).status === 'sent');
      assert.deepEqual(relayed, [id]);
      // Its outcome, not a cancel: the queued send's `sent` (the fake session records no message of its own), reported
      // after the job's write commits.
      await eventually('the sent report', () => reports.length > 0);
      assert.deepEqual(reports, [{ kind: 'message', id, status: 'sent', at: t.clock() }]);
    });
  });
}
