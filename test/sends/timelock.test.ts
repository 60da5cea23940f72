/**
 * The platform's reach-out timelock (docs/decisions/0013-pacing.md) holds an instance's queued sends that open a
 * chat until the end the platform gave, and is reported `SessionStatus` `paused`, then `resumed` at its end. It is
 * stored with the instance's pace: a restart (here a new send queue on the same store, as a new process or another
 * node holding the instance would have) keeps holding those sends and reports `resumed` once the timelock ends. Kept
 * in memory only, the new queue relayed a send into the platform's refusal at once, and the `resumed` after the
 * `paused` a receiver had seen never came. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const HOUR = 3_600_000;
const REASON =
  'the platform restricts this account from messaging new contacts (463 reach-out timelock); existing chats still work';

for (const dialect of testDialects()) {
  describe(`the reach-out timelock outlives the process that met it [${dialect}]`, () => {
    let t: TestApp;
    const relayed: string[] = [];
    let refuse: DomainError | undefined;
    const queues: SendQueue[] = [];

    const status = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** A send queue as a newly started process has it, its reports gathered in `reports`. */
    const startQueue = (reports: SendStatusReport[]) => {
      const session = fakeSession(async (message) => {
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      const queue = testQueue(t.clock, t.services.store.db, t.instance.id, session, async (_id, report) => {
        reports.push(report);
      });
      queues.push(queue);
      return queue;
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
    });
    after(async () => {
      for (const queue of queues) await queue.stop();
      await t.close();
    });

    it('a new queue holds the sends that open a chat until its end, then reports it resumed once', async () => {
      const first: SendStatusReport[] = [];
      const queue = startQueue(first);
      refuse = new DomainError('rate_limited', REASON, {
        retryAfter: 3600,
        restriction: 'reach-out-timelock',
      });
      await insertSendJob(t.services.store.db, textJob(t.instance.id, '3EB0TL00000000000000A1', 'async', T0));
      queue.wake(t.instance.id);
      await eventually('the paused report', () => first.find((r) => r.status === 'paused'));
      assert.deepEqual(first, [
        { kind: 'session', status: 'paused', reason: REASON, until: T0 + HOUR, at: T0 },
      ]);
      assert.deepEqual(await status('3EB0TL00000000000000A1'), { status: 'pending', run_at: T0 + HOUR });
      const stored = await t.services.store.db
        .selectFrom('send_pacing')
        .select(['new_chats_locked_until', 'new_chats_lock_reason'])
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        { until: Number(stored.new_chats_locked_until), reason: stored.new_chats_lock_reason },
        { until: T0 + HOUR, reason: REASON },
      );

      // The process stops; a new one holds the instance. A send to another new chat is accepted meanwhile.
      await queue.stop();
      t.clock.advance(60_000);
      const second: SendStatusReport[] = [];
      const restarted = startQueue(second);
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, '3EB0TL00000000000000A2', 'async', t.clock()),
        chat: '5511966665555@s.whatsapp.net',
      });
      restarted.wake(t.instance.id);
      await eventually(
        'the new send held to the timelock',
        async () => Number((await status('3EB0TL00000000000000A2')).run_at) === T0 + HOUR,
      );
      assert.equal((await status('3EB0TL00000000000000A2')).status, 'pending');
      assert.deepEqual(relayed, [], 'nothing relayed into the timelock');

      t.clock.set(T0 + HOUR);
      restarted.wake(t.instance.id);
      await eventually('both sends relayed', () => relayed.length === 2 && second.length === 3);
      assert.deepEqual(relayed.toSorted(), ['3EB0TL00000000000000A1', '3EB0TL00000000000000A2']);
      assert.deepEqual(
        second.map((r) => r.status),
        ['resumed', 'sent', 'sent'],
      );
      assert.deepEqual(second[0], { kind: 'session', status: 'resumed', at: T0 + HOUR });
      const cleared = await t.services.store.db
        .selectFrom('send_pacing')
        .select(['new_chats_locked_until'])
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirstOrThrow();
      assert.equal(cleared.new_chats_locked_until, null);
    });
  });
}
