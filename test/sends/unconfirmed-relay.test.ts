/**
 * A relay the platform never acknowledged (docs/decisions/0009-sends-as-jobs.md): the engine raises
 * `UnconfirmedRelayError` (no ack within its wait, or the connection closed first; it ended the connection), and the
 * message may or may not have reached the platform. Its job is neither `sent` (it may be lost) nor `failed` (its
 * client would send it a second time): it stays `sending`, the queue relays nothing until the next login, whose
 * hand-back relays it again first, under its id; a synchronous request waits for that relay's outcome, or answers
 * `504` with the outcome unknown once its sync wait has passed. Before, a missing ack counted as the platform's
 * acceptance: the job was marked `sent` and the request answered `200 Sent` for a message that never arrived.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setImmediate as nextLoopTurn } from 'node:timers/promises';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { UnconfirmedRelayError } from '../../src/engines/engine.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { claimNextSendJob } from '../../src/store/send-job-claims.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, settledFlag, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-05-04T08:00:00.000Z');
/** The sync wait of the queue under test, ms. */
const SYNC_WAIT_MS = 60_000;

/** A committed login of the instance, as the event recorder hands it to the queue. */
const LOGIN: EngineEvent = {
  type: 'connection',
  state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
};

for (const dialect of testDialects()) {
  describe(`send queue: a relay the platform never confirmed [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    const reports: SendStatusReport[] = [];
    /** Every relay the engine was asked for, by job id, in order. */
    const relays: string[] = [];
    /** Ids whose next relay the platform does not confirm. */
    const unconfirmed = new Set<string>();
    /** Runs inside the next relay the platform does not confirm, before it fails. */
    let duringUnconfirmed: (() => void) | undefined;

    const session = fakeSession(async (message) => {
      const id = message.id ?? '';
      relays.push(id);
      if (unconfirmed.delete(id)) {
        duringUnconfirmed?.();
        duringUnconfirmed = undefined;
        throw new UnconfirmedRelayError(id, 'no ack within 5 s; the connection is renewed');
      }
      return { id, timestamp: t.clock() };
    });
    const login = () => queue.afterCommit(t.instance.id, LOGIN);
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'locked_by', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const reportsOf = (id: string) =>
      reports.flatMap((r) => (r.kind === 'message' && r.id === id ? [r.status] : []));
    /** Lets the queue run a while: loop turns and a few timer ticks. */
    const settleDown = async () => {
      for (let i = 0; i < 5; i += 1) await nextLoopTurn();
      await new Promise((resolve) => setTimeout(resolve, 100));
    };
    const queued = async (id: string) => {
      await queue.store(textJob(t.instance.id, id, 'async', t.clock()));
      queue.submitted(t.instance.id);
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      queue = testQueue(
        t.clock,
        t.services.store.db,
        t.instance.id,
        session,
        async (_instanceId, report) => {
          reports.push(report);
        },
        { syncWaitMs: SYNC_WAIT_MS },
      );
      queue.wake(t.instance.id);
    });
    let warmUps = 0;
    beforeEach(async () => {
      // A send relayed at once first: the queue has drained and is idle.
      warmUps += 1;
      const warm = await queue.storeSync(
        session,
        textJob(t.instance.id, `3EB0WARM${warmUps}`, 'sync', t.clock()),
      );
      await warm();
      relays.length = 0;
      reports.length = 0;
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('a synchronous send: left unended, nothing passes it; the next login relays it again, sent', async () => {
      const id = '3EB0UNCONFIRMED0000001';
      unconfirmed.add(id);
      const outcome = (await queue.storeSync(session, textJob(t.instance.id, id, 'sync', t.clock())))();
      const settled = settledFlag(outcome);
      await eventually('the first relay', () => relays.includes(id));
      await settleDown();
      assert.equal(settled(), false, 'not answered: the outcome is unknown');
      // Left `sending`, or already handed back `pending` by a pass of the queue that then claims nothing.
      const left = await row(id);
      assert.ok(
        left.status === 'sending' || left.status === 'pending',
        `neither sent nor failed: ${left.status}`,
      );
      assert.deepEqual([left.attempts, left.last_error], [1, null]);
      // Sends accepted meanwhile wait behind it: a queued one, and a synchronous one not relayed at once.
      await queued('3EB0UNCONFIRMED0000002');
      const later = (
        await queue.storeSync(session, textJob(t.instance.id, '3EB0UNCONFIRMED0000003', 'sync', t.clock()))
      )();
      await settleDown();
      assert.deepEqual(relays, [id], 'nothing relayed before the next login');
      assert.equal((await row('3EB0UNCONFIRMED0000003')).status, 'pending', 'stored to wait its turn');

      login();
      assert.deepEqual(await outcome, { id, timestamp: t.clock() });
      assert.deepEqual((await later).id, '3EB0UNCONFIRMED0000003');
      await eventually(
        'the queued send sent',
        async () => (await row('3EB0UNCONFIRMED0000002')).status === 'sent',
      );
      assert.deepEqual(
        relays,
        [id, id, '3EB0UNCONFIRMED0000002', '3EB0UNCONFIRMED0000003'],
        'relayed again first, under its id, then the others in acceptance order',
      );
      assert.deepEqual(
        { ...(await row(id)) },
        { status: 'sent', attempts: 2, locked_by: null, last_error: null },
      );
      assert.deepEqual(reportsOf(id), [], 'its request carried the outcome: no event');
      assert.deepEqual(reportsOf('3EB0UNCONFIRMED0000002'), ['sent']);
    });

    it('a queued send: relayed again after the next login, one sent event, never failed', async () => {
      const id = '3EB0UNCONFIRMED0000011';
      unconfirmed.add(id);
      await queued(id);
      await eventually('the first relay', () => relays.includes(id));
      await settleDown();
      assert.notEqual((await row(id)).status, 'sent');
      assert.notEqual((await row(id)).status, 'failed');
      assert.deepEqual(reportsOf(id), []);
      assert.deepEqual(relays, [id], 'not relayed again before the next login');
      login();
      await eventually('sent', async () => (await row(id)).status === 'sent');
      await settleDown();
      assert.deepEqual(relays, [id, id]);
      assert.deepEqual(reportsOf(id), ['sent'], 'one MessageStatus sent, no failed');
      assert.equal((await row(id)).attempts, 2);
    });

    it('a login committed while the unconfirmed relay ran: handed back and relayed again at once', async () => {
      const id = '3EB0UNCONFIRMED0000021';
      unconfirmed.add(id);
      // The reconnect's login commits before the relay's failure reaches the queue.
      duringUnconfirmed = login;
      const outcome = (await queue.storeSync(session, textJob(t.instance.id, id, 'sync', t.clock())))();
      assert.equal((await outcome).id, id);
      assert.deepEqual(relays, [id, id]);
      assert.equal((await row(id)).status, 'sent');
    });

    it('a login whose state could not be recorded ends the wait as a committed one does', async () => {
      const id = '3EB0UNCONFIRMED0000041';
      unconfirmed.add(id);
      await queued(id);
      await eventually('the first relay', () => relays.includes(id));
      await settleDown();
      assert.deepEqual(relays, [id], 'not relayed again before the next login');
      // What the session layer tells the recorder's projections when it gave the login's recording up.
      queue.unrecorded(t.instance.id, LOGIN);
      await eventually('sent', async () => (await row(id)).status === 'sent');
      await settleDown();
      assert.deepEqual(relays, [id, id], 'relayed again under its id');
      assert.deepEqual(reportsOf(id), ['sent']);
    });

    it('an unrecorded login of an instance whose session is not held here hands nothing back', async () => {
      const other = await t.newInstance();
      const elsewhere = testQueue(t.clock, t.services.store.db, other.id, session, async () => undefined, {
        session: () => undefined,
      });
      try {
        await elsewhere.store(textJob(other.id, '3EB0UNCONFIRMED0000051', 'async', t.clock()));
        const held = await claimNextSendJob(t.services.store.db, other.id, 'other-node', t.clock());
        assert.equal(held?.id, '3EB0UNCONFIRMED0000051');
        elsewhere.unrecorded(other.id, LOGIN);
        await settleDown();
        assert.deepEqual(
          { ...(await row('3EB0UNCONFIRMED0000051')) },
          { status: 'sending', attempts: 1, locked_by: 'other-node', last_error: null },
          'left to the node holding the instance',
        );
      } finally {
        await elsewhere.stop();
      }
    });

    it('no login within the sync wait: 504, outcome unknown; a later login sends it, its event recorded', async () => {
      const id = '3EB0UNCONFIRMED0000031';
      unconfirmed.add(id);
      const outcome = (await queue.storeSync(session, textJob(t.instance.id, id, 'sync', t.clock())))();
      const settled = settledFlag(outcome);
      await eventually('the first relay', () => relays.includes(id));
      await settleDown();
      assert.equal(settled(), false);
      t.clock.advance(SYNC_WAIT_MS);
      await assert.rejects(outcome, (error: unknown) => {
        assert.ok(error instanceof DomainError && error.code === 'timeout', String(error));
        assert.match(
          error.message,
          /outcome is not known; GET \/v1\/messages\/3EB0UNCONFIRMED0000031 shows it/,
        );
        return true;
      });
      assert.notEqual((await row(id)).status, 'failed', 'it may have gone out: never failed for it');
      login();
      await eventually('sent', async () => (await row(id)).status === 'sent');
      await eventually('its event', () => reportsOf(id).length > 0);
      assert.deepEqual(reportsOf(id), ['sent'], 'no request left to carry it: the event tells the outcome');
      assert.deepEqual(relays, [id, id]);
    });
  });
}
