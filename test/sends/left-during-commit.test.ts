/**
 * A synchronous send whose outcome is written while its request waits leaves the outcome's `MessageStatus` event out
 * for the answer to carry (docs/decisions/0076-status-with-its-write.md); when the request leaves after that
 * decision and before the outcome reaches it (its client closed the connection while the write committed), the
 * relay records the event itself: the outcome reaches the client once, as an answer or as an event
 * (docs/decisions/0012-session-and-message-status-events.md, src/sends/waiters.ts). Covers a refusal by the platform
 * and a message that went out but could not be recorded by the engine. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { UnrecordedSendError } from '../../src/engines/engine.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`a request that left while its outcome committed [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    /** What the relay does with the next message. */
    let relay: ((id: string) => Promise<{ id: string; timestamp: number }>) | undefined;
    /**
     * Called after the write of the queue that ended job `id` ran and before its reports are recorded (the commit's
     * answer).
     */
    let onCommitted: { id: string; leave: () => void } | undefined;
    const reports: SendStatusReport[] = [];
    const session = fakeSession(async (message) =>
      relay ? relay(message.id ?? '') : { id: message.id ?? '', timestamp: t.clock() },
    );

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const db = t.services.store.db;
      const report = async (_instanceId: string, each: SendStatusReport) => {
        reports.push(each);
      };
      queue = testQueue(t.clock, db, t.instance.id, session, report, {
        recordWith: async (instanceId, write) => {
          const { result, reports: written } = await write(db);
          if (onCommitted !== undefined) {
            const { id, leave } = onCommitted;
            const row = await db
              .selectFrom('send_jobs')
              .select('status')
              .where('id', '=', id)
              .executeTakeFirst();
            if (row?.status === 'failed' || row?.status === 'sent') {
              onCommitted = undefined;
              leave();
            }
          }
          for (const each of written) await report(instanceId, each);
          return result;
        },
      });
      queue.wake(t.instance.id);
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    /** Sends `id` synchronously; the client leaves once the outcome's write committed. → the request's rejection. */
    const sendAndLeave = async (id: string): Promise<unknown> => {
      const client = new AbortController();
      onCommitted = {
        id,
        leave: () => client.abort(new DomainError('timeout', 'the client closed its connection')),
      };
      const job: NewSendJob = textJob(t.instance.id, id, 'sync', t.clock());
      t.clock.advance(1);
      const wait = await queue.storeSync(session, job, client.signal);
      return wait().then(
        () => assert.fail('the request has left: nothing answers it'),
        (error: unknown) => error,
      );
    };
    const reportsOf = (id: string) =>
      reports.filter((r) => r.kind === 'message' && r.id === id).map((r) => r.kind === 'message' && r.status);

    it('a refusal by the platform is recorded as the failure event', async () => {
      const id = '3EB0COMMITGONE00000001';
      relay = async () => {
        throw new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      };
      const left = await sendAndLeave(id);
      assert.ok(left instanceof DomainError && left.code === 'timeout', String(left));
      assert.equal(onCommitted, undefined, 'the request left as the failure committed');
      await eventually('the failure reported', () => reportsOf(id).length > 0);
      const row = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'last_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, {
        status: 'failed',
        last_error: 'the platform rejected the message (error 479)',
      });
      assert.deepEqual(reportsOf(id), ['failed']);
      const [failed] = reports.filter((r) => r.kind === 'message' && r.id === id);
      assert.equal(
        failed?.kind === 'message' && failed.error,
        'the platform rejected the message (error 479)',
      );
    });

    it('a message that went out but was not recorded by the engine is recorded as the sent event', async () => {
      const id = '3EB0COMMITGONE00000002';
      relay = async (sent) => {
        throw new UnrecordedSendError({ id: sent, timestamp: T0 + 5 }, new Error('the recording failed'));
      };
      const left = await sendAndLeave(id);
      assert.ok(left instanceof DomainError && left.code === 'timeout', String(left));
      assert.equal(onCommitted, undefined, 'the request left as the outcome committed');
      await eventually('the outcome reported', () => reportsOf(id).length > 0);
      const row = await t.services.store.db
        .selectFrom('send_jobs')
        .select('status')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'sent');
      assert.deepEqual(reportsOf(id), ['sent']);
    });

    it('a request still waiting carries the outcome: no event', async () => {
      const id = '3EB0COMMITGONE00000003';
      relay = async () => {
        throw new DomainError('platform_refused', 'refused again');
      };
      const job: NewSendJob = textJob(t.instance.id, id, 'sync', t.clock());
      t.clock.advance(1);
      const wait = await queue.storeSync(session, job);
      await assert.rejects(wait(), /refused again/);
      assert.deepEqual(reportsOf(id), []);
      relay = undefined;
    });
  });
}
