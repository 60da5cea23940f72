/**
 * Queued sends waiting for a new-chat slot (the new-chats-per-day cap, docs/decisions/0013-pacing.md) are woken only
 * as many as the rolling day frees slots, in the order they were held: a freed slot claims the next waiting send, not
 * every one. Before, every waiting send was held to the same instant (the oldest counted relay + 24 h + 1 ms), so each
 * freed slot claimed the whole backlog: one relayed, every other one checked and held back again (a claim, the chat's
 * history, the window's count and a write each), N sends' worth of statements per slot. The cap still holds with the
 * queue woken from several sides at once, and a waiting send is never stranded: not by a cap lifted meanwhile, nor by a
 * new holder of the instance (a restart), nor by a cancel of the send before it.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { encodeSendPayload } from '../../src/sends/payload.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { claimedReleased, Runners, unreleased } from '../../src/sends/runners.ts';
import { releaseSlotWaiters, SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { cancelSendJob, insertSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, firstReadCounter, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const DAY = 86_400_000;
/** A known chat: it has a message, so a send to it opens none. */
const KNOWN = '5511955554444@s.whatsapp.net';

for (const dialect of testDialects()) {
  describe(`a freed new-chat slot wakes the next waiting send only [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    /** The relays the platform saw, in order, with the clock at each. */
    const relayed: [string, number][] = [];
    /** The drain's reads of the instance's first pending job: what a pass does last when it claims nothing. */
    const { plugin: counting, reads: firstReads } = firstReadCounter();
    /** How many reads of the first pending job the drains had made when each send was relayed. */
    const readsAtRelay = new Map<string, number>();
    /** A message in `chat` stored at `at`, as the recorder stores a relayed one or one received. */
    const storeMessage = (id: string, chat: string, fromMe: boolean, at: number) =>
      t.services.store.db
        .insertInto('messages')
        .values({
          instance_id: t.instance.id,
          id,
          chat,
          sender: chat,
          from_me: fromMe ? 1 : 0,
          is_group: 0,
          type: 'text',
          content: JSON.stringify({ kind: 'text', text: id }),
          push_name: '',
          timestamp: at,
          state: fromMe ? 'sent' : 'delivered',
          state_at: at,
          created_at: at,
        })
        .execute();
    // The relayed message is stored in its chat, as the engine's own `message` event has it recorded: a later send to
    // that chat goes to a known chat.
    const session = fakeSession(async (message) => {
      relayed.push([message.id ?? '', t.clock()]);
      readsAtRelay.set(message.id ?? '', firstReads());
      await storeMessage(message.id ?? '', message.to, true, t.clock());
      return { id: message.id ?? '', timestamp: t.clock() };
    });
    /** A new queue for the test instance, as a new holder (a restart) starts one. */
    const newQueue = () =>
      testQueue(t.clock, t.services.store.db.withPlugin(counting), t.instance.id, session);

    /** Stores a queued send `id` to new chat number `n`, or to the known chat. */
    const add = (id: string, n: number | 'known') => {
      const chat = n === 'known' ? KNOWN : `551188880${String(n).padStart(4, '0')}@s.whatsapp.net`;
      return insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        chat,
        payload: encodeSendPayload({ to: chat, content: { kind: 'text', text: id, linkPreview: false } }),
      });
    };
    const row = async (id: string) => {
      const stored = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'updated_at', 'locked_by', 'sent_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return {
        status: stored.status,
        attempts: stored.attempts,
        updatedAt: Number(stored.updated_at),
        sentAt: stored.sent_at === null ? null : Number(stored.sent_at),
      };
    };
    /**
     * Runs `wake` (by default a wake of the queue; it must wake a queue whose drains have all ended) and resolves once
     * the drains it started, `passes` of them, ended with nothing they could claim. Several wakes at once while a
     * drain runs make one more pass of it.
     */
    const drain = async (passes = 1, wake: () => unknown = () => queue.wake(t.instance.id)) => {
      const reads = firstReads();
      await wake();
      await eventually('the drain to end', () => firstReads() >= reads + passes);
      await new Promise((resolve) => setImmediate(resolve));
    };
    /** Wakes the queue `times` at once, as its wakes from several sides at the same instant do. */
    const wakes = (times: number) => () => {
      for (let i = 0; i < times; i += 1) queue.wake(t.instance.id);
    };
    const pace = (newChatsPerDay: number | null) => () =>
      queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay });
    const ids = (from: number) => relayed.slice(from).map(([id]) => id);

    before(async () => {
      t = await createTestApp({ dialect });
      t.clock.set(T0);
      // The known chat has a message: sends to it open no chat.
      await storeMessage('KNOWN-CHAT-MESSAGE', KNOWN, false, T0 - 30 * DAY);
      queue = newQueue();
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it('two slots freed at once relay the next two waiting sends, in order; the others stay as they were', async () => {
      await drain(1, pace(2));
      const waiting = ['3EB0SLOT00000000000A1', '3EB0SLOT00000000000A2', '3EB0SLOT00000000000A3'];
      const more = ['3EB0SLOT00000000000A4', '3EB0SLOT00000000000A5', '3EB0SLOT00000000000A6'];
      for (const [n, id] of ['3EB0SLOT00000000000A0', '3EB0SLOT0000000000A00', ...waiting, ...more].entries())
        await add(id, n);
      await drain();
      assert.deepEqual(relayed, [
        ['3EB0SLOT00000000000A0', T0],
        ['3EB0SLOT0000000000A00', T0],
      ]);
      for (const id of [...waiting, ...more])
        assert.deepEqual(await row(id), { status: 'pending', attempts: 0, updatedAt: T0, sentAt: null });

      // The two relays leave the window together, and the queue is woken from several sides at once (the slot's own
      // wake, a send to a known chat, a scheduled send's): the two sends held first go, the others are not touched.
      t.clock.set(T0 + DAY + 1);
      await add('3EB0SLOT00000000000K1', 'known');
      await drain(2, wakes(3));
      assert.deepEqual(ids(2), ['3EB0SLOT00000000000A1', '3EB0SLOT00000000000A2', '3EB0SLOT00000000000K1']);
      for (const id of ['3EB0SLOT00000000000A3', ...more])
        assert.deepEqual(
          await row(id),
          { status: 'pending', attempts: 0, updatedAt: T0, sentAt: null },
          `${id} not claimed again: no slot was free for it`,
        );

      // A day on, the next two; the cap is never passed: at most two chats opened in any 24 h.
      t.clock.set(T0 + 2 * DAY + 2);
      await drain();
      assert.deepEqual(ids(5), ['3EB0SLOT00000000000A3', '3EB0SLOT00000000000A4']);
      for (const id of ['3EB0SLOT00000000000A5', '3EB0SLOT00000000000A6'])
        assert.deepEqual(await row(id), { status: 'pending', attempts: 0, updatedAt: T0, sentAt: null });
      t.clock.set(T0 + 3 * DAY + 3);
      await drain();
      assert.deepEqual(ids(7), ['3EB0SLOT00000000000A5', '3EB0SLOT00000000000A6']);
      for (const id of [...waiting, ...more])
        assert.equal((await row(id)).attempts, 1, 'one relay, one attempt');
      const opened = relayed.filter(([id]) => id !== '3EB0SLOT00000000000K1').map(([, at]) => at);
      for (const at of opened)
        assert.ok(
          opened.filter((other) => other >= at - DAY && other <= at).length <= 2,
          'two per rolling day',
        );
    });

    it('a waiting send canceled leaves its slot to the next; a new holder and a lifted cap strand none', async () => {
      // From a clean slate: no send of the test before counts or waits.
      await queue.stop();
      await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      queue = newQueue();
      relayed.length = 0;
      const start = T0 + 10 * DAY;
      t.clock.set(start);
      await drain(1, pace(1));
      const sends = [
        '3EB0SLOT00000000000B0',
        '3EB0SLOT00000000000B1',
        '3EB0SLOT00000000000B2',
        '3EB0SLOT00000000000B3',
      ];
      for (const [n, id] of sends.entries()) await add(id, 100 + n);
      await drain();
      assert.deepEqual(ids(0), ['3EB0SLOT00000000000B0']);
      // The first waiting send is canceled: the slot goes to the one after it.
      assert.equal(
        (await cancelSendJob(t.services.store.db, t.instance.id, sends[1] ?? '', start))?.canceled,
        true,
      );
      t.clock.set(start + DAY + 1);
      await drain();
      assert.deepEqual(ids(1), ['3EB0SLOT00000000000B2']);
      assert.deepEqual(await row(sends[3] ?? ''), {
        status: 'pending',
        attempts: 0,
        updatedAt: start,
        sentAt: null,
      });

      // A restart: the new holder's queue wakes the waiting send when its slot frees, though no sweep sees it due.
      await queue.stop();
      queue = newQueue();
      await drain();
      assert.deepEqual(ids(2), [], 'no slot yet');
      t.clock.set(start + 2 * DAY + 2);
      await drain();
      assert.deepEqual(ids(2), ['3EB0SLOT00000000000B3']);

      // Two more wait; the cap is lifted: they go when their hold ends, as any send moved behind.
      await add('3EB0SLOT00000000000B4', 104);
      await add('3EB0SLOT00000000000B5', 105);
      await drain();
      assert.deepEqual(ids(3), []);
      await drain(1, pace(null));
      t.clock.set(start + 3 * DAY + 3);
      await drain();
      assert.deepEqual(ids(3), ['3EB0SLOT00000000000B4', '3EB0SLOT00000000000B5']);
    });

    it('sends to one new chat waiting for a slot are released together, on one slot', async () => {
      await queue.stop();
      await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      queue = newQueue();
      relayed.length = 0;
      const start = T0 + 30 * DAY;
      t.clock.set(start);
      await drain(1, pace(1));
      // One relay opens a chat and fills the window; then two sends to one new chat wait, with a send to another new
      // chat between them and one to a third after them.
      await add('3EB0SLOT00000000000D0', 300);
      await add('3EB0SLOT00000000000D1', 301);
      await add('3EB0SLOT00000000000D2', 302);
      await add('3EB0SLOT00000000000D3', 301);
      await add('3EB0SLOT00000000000D4', 303);
      await drain();
      assert.deepEqual(ids(0), ['3EB0SLOT00000000000D0']);

      // The slot frees: the first chat waiting takes it, with both its sends. The first relayed opens the chat, the
      // second goes to a known chat and needs no slot of its own: it does not wait another day, nor take the next
      // slot from the chat waiting behind.
      const frees = start + DAY + 1;
      t.clock.set(frees);
      await drain();
      assert.deepEqual(relayed.slice(1), [
        ['3EB0SLOT00000000000D1', frees],
        ['3EB0SLOT00000000000D3', frees],
      ]);
      for (const id of ['3EB0SLOT00000000000D1', '3EB0SLOT00000000000D3'])
        assert.deepEqual(await row(id), { status: 'sent', attempts: 1, updatedAt: frees, sentAt: frees });
      for (const id of ['3EB0SLOT00000000000D2', '3EB0SLOT00000000000D4'])
        assert.deepEqual(
          await row(id),
          { status: 'pending', attempts: 0, updatedAt: start, sentAt: null },
          `${id} not claimed: the one slot went to the chat before it`,
        );
      const opened = await t.services.store.db
        .selectFrom('send_jobs')
        .select('id')
        .where('instance_id', '=', t.instance.id)
        .where('new_chat', '=', 1)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        opened.map((job) => job.id),
        ['3EB0SLOT00000000000D0', '3EB0SLOT00000000000D1'],
        'one chat opened per slot',
      );

      // The next slot goes to the next chat waiting, the one after to the last.
      t.clock.set(frees + DAY + 1);
      await drain();
      assert.deepEqual(ids(3), ['3EB0SLOT00000000000D2']);
      assert.deepEqual(await row('3EB0SLOT00000000000D4'), {
        status: 'pending',
        attempts: 0,
        updatedAt: start,
        sentAt: null,
      });
      t.clock.set(frees + 2 * DAY + 2);
      await drain();
      assert.deepEqual(ids(4), ['3EB0SLOT00000000000D4']);
    });

    it('the release takes the first chats in wait order with every waiting send of each', async () => {
      await queue.stop();
      const db = t.services.store.db;
      await db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      const chat = (n: number) => `551188880${String(n).padStart(4, '0')}@s.whatsapp.net`;
      const now = T0 + 40 * DAY;
      // Waiting, in wait order (place, then acceptance): chat 401 twice, around 402; 403 last. 402's first send has
      // the place of 401's second, accepted after it, so chat 401 comes first by acceptance; 404 is not waiting.
      const waiting: [string, number, number][] = [
        ['3EB0SLOT00000000000E1', 401, now - 3],
        ['3EB0SLOT00000000000E2', 401, now - 2],
        ['3EB0SLOT00000000000E3', 402, now - 2],
        ['3EB0SLOT00000000000E4', 401, now - 1],
        ['3EB0SLOT00000000000E5', 403, now - 1],
      ];
      for (const [id, n, place] of waiting)
        await insertSendJob(db, {
          ...textJob(t.instance.id, id, 'async', place),
          chat: chat(n),
          runAt: SLOT_WAIT + place,
        });
      await insertSendJob(db, {
        ...textJob(t.instance.id, '3EB0SLOT00000000000E6', 'async', now),
        chat: chat(401),
      });
      const runAt = async (id: string) =>
        Number(
          (await db.selectFrom('send_jobs').select('run_at').where('id', '=', id).executeTakeFirstOrThrow())
            .run_at,
        );

      assert.deepEqual(await releaseSlotWaiters(db, t.instance.id, now, 1), {
        released: [
          { id: '3EB0SLOT00000000000E1', chat: chat(401), user: chat(401) },
          { id: '3EB0SLOT00000000000E2', chat: chat(401), user: chat(401) },
          { id: '3EB0SLOT00000000000E4', chat: chat(401), user: chat(401) },
        ],
        more: true,
      });
      for (const [id, n, place] of waiting)
        assert.equal(
          await runAt(id),
          n === 401 ? place : SLOT_WAIT + place,
          `${id}: only chat 401's sends released`,
        );
      assert.equal(await runAt('3EB0SLOT00000000000E6'), now, 'a send not waiting is not touched');
      // Three slots, two chats left to take them: the rest, and none waits any more.
      assert.deepEqual(await releaseSlotWaiters(db, t.instance.id, now, 3), {
        released: [
          { id: '3EB0SLOT00000000000E3', chat: chat(402), user: chat(402) },
          { id: '3EB0SLOT00000000000E5', chat: chat(403), user: chat(403) },
        ],
        more: false,
      });
      for (const [id, , place] of waiting) assert.equal(await runAt(id), place, id);
      await db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      queue = newQueue();
    });

    it("the wake for a freed slot is kept when a scheduled send's earlier wake took its place", async () => {
      await queue.stop();
      await t.services.store.db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      queue = newQueue();
      relayed.length = 0;
      const start = T0 + 20 * DAY;
      const frees = start + DAY + 1;
      t.clock.set(start);
      await drain(1, pace(1));
      await add('3EB0SLOT00000000000C0', 200);
      await add('3EB0SLOT00000000000C1', 201);
      await drain();
      assert.deepEqual(ids(0), ['3EB0SLOT00000000000C0']);
      // Shortly before the slot frees, a send to the known chat is scheduled 50 ms ahead: its wake, earlier, takes the
      // place of the slot's. These wakes are the queue's own timers, on the real clock: the test moves its clock to
      // the time each is set for, and waits for them.
      t.clock.set(frees - 100);
      const at = frees - 50;
      await insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, '3EB0SLOT00000000000C2', 'async', t.clock()),
        chat: KNOWN,
        runAt: at,
        sendAt: at,
      });
      await drain(1, () => queue.scheduled(t.instance.id, at));
      t.clock.set(at);
      await eventually('the scheduled send, at its wake', () => relayed.length === 2);
      // The drain that relayed it ends (with nothing more due) before the clock moves on.
      await eventually(
        'the drain to end',
        () => firstReads() > (readsAtRelay.get('3EB0SLOT00000000000C2') ?? Number.POSITIVE_INFINITY),
      );
      assert.deepEqual(ids(1), ['3EB0SLOT00000000000C2']);
      // The slot frees: its wake, set again after the scheduled send's, relays the waiting send.
      t.clock.set(frees);
      await eventually('the waiting send, at the wake for its slot', () => relayed.length === 3);
      assert.deepEqual(relayed.slice(1), [
        ['3EB0SLOT00000000000C2', at],
        ['3EB0SLOT00000000000C1', frees],
      ]);
    });
  });
}

describe('the slots set aside for released sends are counted per chat', () => {
  it('a chat holds one slot until the first claim of its sends, or the cancel of its last one', () => {
    const runners = new Runners(
      () => 0,
      () => undefined,
      () => true,
    );
    const runner = runners.get('i-1');
    const release = (id: string, chat: string) => {
      runner.slotsReleased.set(id, chat);
      runner.slotChats.add(chat);
    };
    release('X1', 'x');
    release('X2', 'x');
    release('Y1', 'y');
    assert.equal(runner.slotChats.size, 2, 'two chats, two slots');
    // One of a chat's two sends canceled: the other still needs the slot.
    runner.slotCheckAt = Number.POSITIVE_INFINITY;
    assert.equal(unreleased(runner, 'X1'), false);
    assert.deepEqual([...runner.slotChats], ['x', 'y']);
    assert.equal(runner.slotCheckAt, Number.POSITIVE_INFINITY);
    // Its claim ends the chat's slot; a later send of the chat claimed still keeps its place if held again.
    release('X3', 'x');
    assert.equal(claimedReleased(runner, 'X2'), true);
    assert.deepEqual([...runner.slotChats], ['y']);
    assert.equal(runner.slotCheckAt, 0, 'the window is looked at again');
    assert.equal(claimedReleased(runner, 'X3'), true);
    assert.deepEqual([...runner.slotChats], ['y']);
    // The last send of a chat canceled: its slot is free again.
    runner.slotCheckAt = Number.POSITIVE_INFINITY;
    assert.equal(unreleased(runner, 'Y1'), true);
    assert.equal(runner.slotChats.size, 0);
    assert.equal(runner.slotCheckAt, 0);
    assert.equal(claimedReleased(runner, 'K1'), false, 'a send never released');
  });
});
