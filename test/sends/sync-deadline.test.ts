/**
 * A synchronous send waiting its turn in the queue (docs/decisions/0009-sends-as-jobs.md): failed unsent, with
 * `504 timeout`, when no relay claimed it within the sync wait, so it never goes out after its request answered;
 * a job a relay claimed before the deadline keeps its wait and gets the relay's answer, read from the store when
 * another node's relay holds it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, settledFlag, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
/** The queue's sync wait in these tests, ms. */
const WAIT_MS = 300;

for (const dialect of testDialects()) {
  describe(`send queue: the deadline of a synchronous send waiting its turn [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    /** The messages the queue logged (debug and above). */
    const logged: string[] = [];
    let connected = false;
    const relayed: string[] = [];
    /** The status reports the queue recorded. */
    const reports: SendStatusReport[] = [];
    /** Holds the relay of this job id until released. */
    let gate: { id: string; started: boolean; released: Promise<void> } | undefined;

    const syncJob = (id: string): NewSendJob => textJob(t.instance.id, id, 'sync', t.clock());
    const row = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const session = fakeSession(
      async (message) => {
        if (gate && gate.id === message.id && !gate.started) {
          gate.started = true;
          await gate.released;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      },
      () => connected,
    );

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const report = async (_instanceId: string, each: SendStatusReport) => {
        reports.push(each);
      };
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, report, {
        logger: pino(
          { level: 'debug' },
          {
            write: (line: string) => {
              logged.push(String((JSON.parse(line) as { msg?: unknown }).msg));
            },
          },
        ),
        syncWaitMs: WAIT_MS,
      });
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('a send no relay claimed in time fails unsent with 504 timeout, and never goes out later', async () => {
      // The session is away: the queue cannot claim the job.
      const wait = await queue.storeSync(session, syncJob('3EB0AAAAAAAAAAAAAAAAAA'));
      assert.equal((await row('3EB0AAAAAAAAAAAAAAAAAA')).status, 'pending');
      await assert.rejects(wait(), (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(error.code, 'timeout');
        assert.equal(error.message, 'the message could not be relayed within 1 s and was not sent');
        return true;
      });
      const failed = await row('3EB0AAAAAAAAAAAAAAAAAA');
      assert.deepEqual(
        [failed.status, failed.attempts, failed.last_error],
        ['failed', 0, 'the message could not be relayed within 1 s and was not sent'],
      );
      // The session comes back: the queue relays what is due, and the expired job is not.
      connected = true;
      const next = await queue.storeSync(session, syncJob('3EB0BBBBBBBBBBBBBBBBBB'));
      assert.equal((await next()).id, '3EB0BBBBBBBBBBBBBBBBBB');
      assert.deepEqual(relayed, ['3EB0BBBBBBBBBBBBBBBBBB']);
    });

    it('a send a relay claimed before the deadline keeps its wait and gets the relay answer', async () => {
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      gate = { id: '3EB0CCCCCCCCCCCCCCCCCC', started: false, released };
      connected = true;
      // A paced queue relays nothing at once: the send waits its turn, and the queue claims it.
      await queue.setPacing(t.instance.id, { minIntervalMs: 1, jitterMs: 0, newChatsPerDay: null });
      // The pace counts from the last relay.
      t.clock.advance(1);
      const first = await queue.storeSync(session, syncJob('3EB0CCCCCCCCCCCCCCCCCC'));
      const outcome = first();
      await eventually('the relay under way', () => gate?.started);
      await eventually('the deadline passed during the relay', () =>
        logged.includes('a synchronous send waits past its deadline for its relay'),
      );
      assert.equal((await row('3EB0CCCCCCCCCCCCCCCCCC')).status, 'sending', 'not failed under its relay');
      release();
      assert.equal((await outcome).id, '3EB0CCCCCCCCCCCCCCCCCC');
      assert.deepEqual((await row('3EB0CCCCCCCCCCCCCCCCCC')).status, 'sent');
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
    });

    it("a send another node's relay holds at the deadline (the instance moved) answers that relay's outcome", async () => {
      connected = false;
      // A paced queue relays nothing at once: the send is stored pending, to wait its turn.
      await queue.setPacing(t.instance.id, { minIntervalMs: 1, jitterMs: 0, newChatsPerDay: null });
      const id = '3EB0DDDDDDDDDDDDDDDDDD';
      const wait = await queue.storeSync(session, syncJob(id));
      assert.equal((await row(id)).status, 'pending');
      // Another node took the instance and claimed the job (before this request's wait, and so its deadline, starts).
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ status: 'sending', attempts: 1, locked_by: 'other-node', locked_at: t.clock() })
        .where('id', '=', id)
        .execute();
      const outcome = wait();
      const settled = settledFlag(outcome);
      await eventually('the deadline passed: the send follows the other relay', () =>
        logged.includes("a synchronous send past its deadline follows another node's relay"),
      );
      assert.equal(settled(), false, 'waits for the other relay');
      await t.services.store.db
        .updateTable('send_jobs')
        .set({ status: 'sent', locked_by: null, locked_at: null, sent_at: T0 + 9_000 })
        .where('id', '=', id)
        .execute();
      await eventually('the request answered', () => settled());
      assert.deepEqual(await outcome, { id, timestamp: T0 + 9_000 });
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
    });

    it('a send whose client left before the deadline is failed unsent at it all the same, its failure an event', async () => {
      connected = false;
      const id = '3EB0EEEEEEEEEEEEEEEEEE';
      const client = new AbortController();
      const wait = await queue.storeSync(session, syncJob(id), client.signal);
      assert.equal((await row(id)).status, 'pending', 'waiting its turn');
      const outcome = wait().catch((error: unknown) => error);
      client.abort(new DomainError('timeout', 'the client closed its connection before the answer'));
      const left = await outcome;
      assert.ok(left instanceof DomainError && left.message.startsWith('the client closed'), String(left));
      await eventually('failed at its deadline', async () => (await row(id)).status === 'failed');
      const failed = await row(id);
      assert.deepEqual(
        [failed.attempts, failed.last_error],
        [0, 'the message could not be relayed within 1 s and was not sent'],
      );
      assert.deepEqual(
        reports
          .filter((r) => r.kind === 'message' && r.id === id)
          .map((r) => r.kind === 'message' && r.status),
        ['failed'],
        'its outcome reported once, as an event',
      );
      // The session comes back: the queue relays what is due, and the send its client gave up on is not.
      connected = true;
      const next = await queue.storeSync(session, syncJob('3EB0FFFFFFFFFFFFFFFFFF'));
      assert.equal((await next()).id, '3EB0FFFFFFFFFFFFFFFFFF');
      assert.ok(!relayed.includes(id), 'never sent');
    });
  });
}
