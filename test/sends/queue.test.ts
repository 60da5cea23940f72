import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError, errors } from '../../src/domain/errors.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { insertSendJob, type NewSendJob } from '../../src/store/send-jobs.ts';
import { writePause } from '../../src/store/send-pacing.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, storeGone, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

/** A session that is always connected and hands each send to `relay` (which may throw). */
for (const dialect of testDialects()) {
  describe(`send queue: restriction pause, reclaim after a dead node [${dialect}]`, () => {
    let t: TestApp;
    const reports: SendStatusReport[] = [];
    const relayed: string[] = [];
    let refuse: DomainError | undefined;
    /** Holds the next relay of this job id until released (its relay has started then). */
    let gate: { id: string; started: boolean; released: Promise<void> } | undefined;
    let session: EngineSession;
    let queue: SendQueue;

    /** A new text job to CHAT (synchronous or queued, with the API's attempts). */
    const newJob = (id: string, mode: 'sync' | 'async'): NewSendJob =>
      textJob(t.instance.id, id, mode, t.clock());
    /** Stores a queued job, or one left `sending` by a dead node. */
    const addJob = async (id: string, status?: 'sending') => {
      await insertSendJob(t.services.store.db, {
        ...newJob(id, 'async'),
        ...(status ? { claimedBy: 'a-dead-node' } : {}),
      });
    };
    const syncJob = (id: string) => newJob(id, 'sync');
    const status = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'not_before', 'attempts', 'locked_by'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      session = fakeSession(async (message) => {
        if (gate && gate.id === message.id && !gate.started) {
          gate.started = true;
          await gate.released;
        }
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, async (_instanceId, report) => {
        reports.push(report);
      });
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('a job left sending by a dead node is handed back and relayed once, under its id', async () => {
      await addJob('3EB0AAAAAAAAAAAAAAAAAA', 'sending');
      queue.wake(t.instance.id);
      await eventually(
        'the reclaimed job relayed',
        async () => (await status('3EB0AAAAAAAAAAAAAAAAAA')).status === 'sent',
      );
      assert.deepEqual(relayed, ['3EB0AAAAAAAAAAAAAAAAAA']);
      assert.equal(
        (await status('3EB0AAAAAAAAAAAAAAAAAA')).attempts,
        2,
        "attempts count claims: the dead node's and this node's",
      );
      // This fake session records no message of its own (whose transaction would derive the event): the queue
      // reports the queued send's `sent` with the job's write.
      await eventually('the sent report', () => reports.length > 0);
      assert.deepEqual(reports, [{ kind: 'message', id: '3EB0AAAAAAAAAAAAAAAAAA', status: 'sent', at: T0 }]);
    });

    it('a platform rate-overlimit pauses the queue until its end, keeps the job pending, then resumes', async () => {
      reports.length = 0;
      refuse = new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 30 });
      await addJob('3EB0BBBBBBBBBBBBBBBBBB');
      queue.wake(t.instance.id);
      await eventually('the pause', () => reports.find((r) => r.status === 'paused'));
      assert.deepEqual(reports[0], {
        kind: 'session',
        status: 'paused',
        reason: 'the platform rate-limited this account',
        until: T0 + 30_000,
        at: T0,
      });
      const held = await status('3EB0BBBBBBBBBBBBBBBBBB');
      assert.equal(held.status, 'pending');
      assert.equal(Number(held.run_at), T0, 'its place in acceptance order kept');
      assert.equal(Number(held.not_before), T0 + 30_000, 'tried again at the pause end');
      assert.deepEqual(await queue.pause(t.instance.id), {
        reason: 'the platform rate-limited this account',
        until: T0 + 30_000,
      });
      t.clock.advance(29_000);
      queue.wake(t.instance.id);
      assert.equal((await status('3EB0BBBBBBBBBBBBBBBBBB')).status, 'pending', 'still paused');
      t.clock.advance(1_000);
      queue.wake(t.instance.id);
      await eventually(
        'the job after the pause',
        async () => (await status('3EB0BBBBBBBBBBBBBBBBBB')).status === 'sent',
      );
      await eventually('its sent report', () => reports.some((r) => r.status === 'sent'));
      assert.deepEqual(
        reports.map((r) => r.status),
        ['paused', 'resumed', 'sent'],
      );
      assert.equal(await queue.pause(t.instance.id), null);
    });

    it('a refusal fails an async job with the platform reason', async () => {
      reports.length = 0;
      refuse = new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      await addJob('3EB0CCCCCCCCCCCCCCCCCC');
      queue.wake(t.instance.id);
      await eventually(
        'the failure',
        async () => (await status('3EB0CCCCCCCCCCCCCCCCCC')).status === 'failed',
      );
      // The report follows the job's write.
      await eventually('the failed report', () => reports.length > 0);
      assert.deepEqual(reports, [
        {
          kind: 'message',
          id: '3EB0CCCCCCCCCCCCCCCCCC',
          status: 'failed',
          error: 'the platform rejected the message (error 479)',
          at: t.clock(),
        },
      ]);
    });

    it('a login committed while a synchronous send relays at once leaves that job alone: relayed once', async () => {
      // Also when a second request under the same id (a forward tried again) failed to store meanwhile.
      // The queue relays a synchronous send at once (stored claimed) once it drained with nothing due.
      let probes = 0;
      await eventually('a synchronous send relayed at once', async () => {
        probes += 1;
        const probe = syncJob(`3EB0PROBE${String(probes).padStart(13, '0')}`);
        const wait = await queue.storeSync(session, probe);
        const stored = (await status(probe.id)).status;
        await wait();
        return stored === 'sending';
      });
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { id: '3EB0DDDDDDDDDDDDDDDDDD', started: false, released };
      const wait = await queue.storeSync(session, syncJob('3EB0DDDDDDDDDDDDDDDDDD'));
      assert.equal((await status('3EB0DDDDDDDDDDDDDDDDDD')).status, 'sending', 'stored claimed');
      const outcome = wait();
      await eventually('the relay under way', () => gate?.started);
      await assert.rejects(queue.storeSync(session, syncJob('3EB0DDDDDDDDDDDDDDDDDD')), 'the id is taken');
      // A job a dead node left `sending`, which a hand-back gives back.
      await addJob('3EB0FFFFFFFFFFFFFFFFFF', 'sending');
      // A login commits meanwhile (a reconnect): the queue hands back the `sending` jobs it holds no relay of, then
      // relays what is due (that job, and a queued job stored after it) once the synchronous send's relay ended
      // (docs/decisions/0013-pacing.md: nothing goes out beside it).
      queue.afterCommit(t.instance.id, {
        type: 'connection',
        state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
      });
      await addJob('3EB0EEEEEEEEEEEEEEEEEE');
      queue.wake(t.instance.id);
      await eventually(
        'the hand-back',
        async () => (await status('3EB0FFFFFFFFFFFFFFFFFF')).status === 'pending',
      );
      const held = await status('3EB0DDDDDDDDDDDDDDDDDD');
      assert.deepEqual(
        [held.status, held.attempts, held.locked_by],
        ['sending', 1, 'this-node'],
        'not handed back',
      );
      release();
      assert.equal((await outcome).id, '3EB0DDDDDDDDDDDDDDDDDD');
      await eventually(
        'the queued job relayed after the hand-back',
        async () => (await status('3EB0EEEEEEEEEEEEEEEEEE')).status === 'sent',
      );
      const ids = ['3EB0DDDDDDDDDDDDDDDDDD', '3EB0FFFFFFFFFFFFFFFFFF', '3EB0EEEEEEEEEEEEEEEEEE'];
      assert.deepEqual(
        relayed.filter((id) => ids.includes(id)),
        ids,
        'the held job relayed once, by its own request, and first',
      );
      const sent = await status('3EB0DDDDDDDDDDDDDDDDDD');
      assert.deepEqual([sent.status, sent.attempts], ['sent', 1]);
    });

    it('a new hold reads the pace and pause again: what another node stored meanwhile applies', async () => {
      // This node read (and cached) the instance's pace while it held it: none.
      assert.deepEqual((await queue.pacing(t.instance.id)).pacing.minIntervalMs, 0);
      // The instance moves to another node, which stores a pace and a restriction pause, then comes back here.
      const other = testQueue(t.clock, t.services.store.db, t.instance.id, session, async () => undefined, {
        nodeId: 'other-node',
      });
      try {
        await other.setPacing(t.instance.id, { minIntervalMs: 600_000, jitterMs: 0, newChatsPerDay: null });
        const pause = { reason: 'rate-overlimit (429)', until: t.clock() + 1_800_000 };
        await writePause(t.services.store.db, t.instance.id, pause, t.clock());
        queue.afterCommit(t.instance.id, {
          type: 'connection',
          state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
        });
        const stored = await queue.pacing(t.instance.id);
        assert.equal(stored.pacing.minIntervalMs, 600_000);
        assert.deepEqual(stored.pause, pause);
      } finally {
        await other.stop();
        await other.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
        await writePause(t.services.store.db, t.instance.id, null, t.clock());
        queue.afterCommit(t.instance.id, {
          type: 'connection',
          state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
        });
      }
    });

    it('a status report waits out an unreachable store and is recorded once it answers; a lost answer or another error is logged', async () => {
      let calls = 0;
      const recorded: SendStatusReport[] = [];
      const reporting = testQueue(
        t.clock,
        t.services.store.db,
        t.instance.id,
        session,
        async (_id, report) => {
          calls += 1;
          // Refused before anything was written (no connection): tried again.
          if (calls < 3) throw errors.storeUnavailable();
          // The connection broke during the commit: the event may be stored, so it is not recorded a second time.
          if (report.status === 'failed') throw errors.storeUnavailable(storeGone());
          if (report.status === 'sent') throw new TypeError('a bug in the recorder');
          recorded.push(report);
        },
      );
      try {
        const messageReport = (id: string, status: 'sent' | 'failed' | 'canceled'): SendStatusReport => ({
          kind: 'message',
          id,
          status,
          at: T0,
        });
        const canceled = messageReport('3EB0REPORTED0000000001', 'canceled');
        await reporting.report(t.instance.id, canceled);
        assert.equal(calls, 3, 'tried until the store answered');
        assert.deepEqual(recorded, [canceled]);
        await reporting.report(t.instance.id, messageReport('3EB0REPORTED0000000002', 'failed'));
        assert.equal(calls, 4, 'its outcome unknown: tried once, logged');
        await reporting.report(t.instance.id, messageReport('3EB0REPORTED0000000003', 'sent'));
        assert.equal(calls, 5, 'not an unreachable store: tried once, logged');
        assert.deepEqual(recorded, [canceled]);
      } finally {
        await reporting.stop();
      }
    });
  });
}
