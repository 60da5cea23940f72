/**
 * A queued send held back before its relay, by the new-chats-per-day pace or by a reach-out timelock in force, keeps
 * its attempts for its relays (docs/decisions/0009-sends-as-jobs.md: attempts are counted at claim and given back
 * by such a hold), and is held until the rolling day really frees a slot: 1 ms after the oldest counted relay + 24 h,
 * when the window no longer counts it (docs/decisions/0013-pacing.md). Before, every freed slot claimed and held
 * every waiting send once more, each claim spending an attempt, so a backlog used up its tries before its first
 * relay, and a send held to the oldest relay + 24 h was claimed at that instant and held again to the same time. A
 * freed slot now releases only the next waiting send (test/sends/new-chat-slots.test.ts).
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const DAY = 86_400_000;

for (const dialect of testDialects()) {
  describe(`sends held back before their relay keep their attempts [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    const relayed: string[] = [];
    let refuse: DomainError | undefined;

    /** Stores a queued send `id` to chat `5511900000<n>` (a new chat), with `maxAttempts` tries. */
    const add = (id: string, n: number, maxAttempts = 25) =>
      insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        chat: `551190000${String(n).padStart(4, '0')}@s.whatsapp.net`,
        maxAttempts,
      });
    const row = async (id: string) => {
      const stored = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'attempts', 'last_error', 'sent_at', 'locked_by', 'updated_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return {
        status: stored.status,
        runAt: Number(stored.run_at),
        attempts: stored.attempts,
        lastError: stored.last_error,
        sentAt: stored.sent_at === null ? null : Number(stored.sent_at),
        lockedBy: stored.locked_by,
        updatedAt: Number(stored.updated_at),
      };
    };

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      const session = fakeSession(async (message) => {
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      queue = testQueue(t.clock, t.services.store.db, t.instance.id, session);
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('newChatsPerDay 1: a backlog waits day after day, each send relayed with its tries intact', async () => {
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 });
      // Two tries each, so that a hold spending one would show within two days.
      const ids = [
        '3EB0HELD00000000000K0',
        '3EB0HELD00000000000K1',
        '3EB0HELD00000000000K2',
        '3EB0HELD00000000000K3',
      ];
      for (const [n, id] of ids.entries()) await add(id, n, 2);
      queue.wake(t.instance.id);
      let opened = T0;
      for (let day = 0; day < 3; day += 1) {
        const sending = ids[day] ?? '';
        await eventually(`${sending} sent`, async () => (await row(sending)).status === 'sent');
        assert.equal((await row(sending)).sentAt, opened);
        assert.equal((await row(sending)).attempts, 1, 'one relay, one attempt');
        const frees = opened + DAY + 1;
        for (const waiting of ids.slice(day + 1)) {
          const held = await eventually(`${waiting} held`, async () => {
            const stored = await row(waiting);
            return stored.lockedBy === null && stored.lastError !== null && stored;
          });
          assert.equal(held.status, 'pending');
          assert.match(held.lastError ?? '', /1 new chats per day/);
          assert.equal(held.attempts, 0, `${waiting} held before its relay keeps its attempts`);
          // Held once, at its first claim, to wait for a slot in the order of its hold: a freed slot releases the
          // next one only (test/sends/new-chat-slots.test.ts), so the others are not claimed again meanwhile.
          assert.equal(held.updatedAt, T0, `${waiting} not claimed again`);
          assert.equal(
            held.runAt,
            SLOT_WAIT + T0 + DAY + 1,
            'its place: the first instant the window no longer counted the oldest relay when it was held',
          );
        }
        // Held until 1 ms past the oldest relay + 24 h: at that instant the window no longer counts it, and the
        // next send goes at once.
        t.clock.set(frees);
        opened = frees;
        if (day === 2) refuse = new DomainError('platform_unreachable', 'the platform could not be reached');
        queue.wake(t.instance.id);
      }
      // The last send's first relay fails on a dropped connection: tried again, one of its two tries left.
      const last = ids[3] ?? '';
      await eventually('the failed relay put back', async () =>
        (await row(last)).lastError?.includes('reached'),
      );
      assert.deepEqual(
        [(await row(last)).status, (await row(last)).attempts],
        ['pending', 1],
        'a first transient failure is tried again',
      );
      t.clock.advance(1_000);
      queue.wake(t.instance.id);
      await eventually(`${last} sent`, async () => (await row(last)).status === 'sent');
      assert.equal((await row(last)).attempts, 2);
      assert.deepEqual(relayed, ids);
    });

    it('a reach-out timelock in force holds a send to a new chat without spending its attempt', async () => {
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
      relayed.length = 0;
      const start = t.clock();
      refuse = new DomainError('rate_limited', 'reach-out timelock (463)', {
        retryAfter: 3600,
        restriction: 'reach-out-timelock',
      });
      await add('3EB0HELD0000000000TL1', 101);
      await add('3EB0HELD0000000000TL2', 102);
      queue.wake(t.instance.id);
      await eventually(
        'the second held to the timelock end',
        async () => (await row('3EB0HELD0000000000TL2')).runAt === start + 3_600_000,
      );
      const refused = await row('3EB0HELD0000000000TL1');
      assert.deepEqual(
        [refused.status, refused.runAt, refused.attempts],
        ['pending', start + 3_600_000, 1],
        'the relay the platform refused counts',
      );
      const held = await row('3EB0HELD0000000000TL2');
      assert.deepEqual(
        [held.status, held.attempts],
        ['pending', 0],
        'held before its relay: no attempt spent',
      );
      t.clock.set(start + 3_600_000);
      queue.wake(t.instance.id);
      await eventually('both sent', () => relayed.length === 2);
      assert.deepEqual(relayed, ['3EB0HELD0000000000TL1', '3EB0HELD0000000000TL2']);
      assert.equal((await row('3EB0HELD0000000000TL1')).attempts, 2);
      assert.equal((await row('3EB0HELD0000000000TL2')).attempts, 1);
    });
  });
}
