/**
 * The new-chats-per-day cap (docs/decisions/0013-pacing.md) takes one slot per user whichever address a send names
 * them by, when parley keeps the user's phone↔LID pair (docs/decisions/0038-lid-mappings.md): the sends waiting for a
 * slot to a user by number (`<digits>@s.whatsapp.net`) and by LID (`<n>@lid`) are released together on one slot, in
 * their wait order, and the window counts a user once. Before, the release told chats apart by the address sent to
 * (`send_jobs.chat`): the send by the other form waited for a slot of its own (a day at a cap of one, behind another
 * user's send that waited after it), and a user whose two forms were each counted as opening a chat (the pair learned
 * after both relays) filled two slots of the window, holding back another user's new chat. While the pair is not
 * kept, the two forms are two chats as far as parley can tell. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { userJid } from '../../src/domain/messages.ts';
import { releaseFreedSlots } from '../../src/sends/new-chat-slots.ts';
import { encodeSendPayload } from '../../src/sends/payload.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { claimedReleased, Runners } from '../../src/sends/runners.ts';
import { findLidMappingByLid, upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { countNewChatsSince, oldestNewChatSince } from '../../src/store/send-pacing.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, firstReadCounter, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-06-01T08:00:00.000Z');
const DAY = 86_400_000;

/** User number `n`'s phone digits, and the LID digits parley may keep for it. */
const phoneOf = (n: number) => `551177770${String(n).padStart(4, '0')}`;
const lidOf = (n: number) => `9${String(n).padStart(4, '0')}000111`;

for (const dialect of testDialects()) {
  describe(`a user takes one new-chat slot, by number or by LID [${dialect}]`, () => {
    let t: TestApp;
    let queue: SendQueue;
    /** The relays the platform saw, in order, with the clock at each. */
    const relayed: [string, number][] = [];
    /** The drain's reads of the instance's first pending job: what a pass does last when it claims nothing. */
    const { plugin: counting, reads: firstReads } = firstReadCounter();
    // The relayed message is stored in its chat, as the recorder stores it: a send by LID whose pair is kept under
    // the phone JID (docs/decisions/0038-lid-mappings.md), under the LID while none is.
    const session = fakeSession(async (message) => {
      const id = message.id ?? '';
      relayed.push([id, t.clock()]);
      const db = t.services.store.db;
      const lid = message.to.endsWith('@lid') ? message.to.slice(0, -'@lid'.length) : undefined;
      const pair = lid === undefined ? undefined : await findLidMappingByLid(db, t.instance.id, lid);
      const chat = pair === undefined ? message.to : userJid(pair.phone);
      const at = t.clock();
      await db
        .insertInto('messages')
        .values({
          instance_id: t.instance.id,
          id,
          chat,
          sender: chat,
          from_me: 1,
          is_group: 0,
          type: 'text',
          content: JSON.stringify({ kind: 'text', text: id }),
          push_name: '',
          timestamp: at,
          state: 'sent',
          state_at: at,
          created_at: at,
        })
        .execute();
      return { id, timestamp: at };
    });

    /** Stores a queued send `id` to user `n`, by number or by LID. */
    const add = (id: string, n: number, by: 'number' | 'lid') => {
      const chat = by === 'number' ? userJid(phoneOf(n)) : `${lidOf(n)}@lid`;
      return insertSendJob(t.services.store.db, {
        ...textJob(t.instance.id, id, 'async', t.clock()),
        chat,
        payload: encodeSendPayload({ to: chat, content: { kind: 'text', text: id, linkPreview: false } }),
      });
    };
    /** Keeps the pair of user `n`, as the recorder stores a pair the platform taught. */
    const pair = (n: number) =>
      upsertLidMappings(
        t.services.store.db,
        t.instance.id,
        [{ lid: lidOf(n), phone: phoneOf(n) }],
        t.clock(),
      );
    const row = async (id: string) => {
      const stored = await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'new_chat', 'sent_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return {
        status: stored.status,
        attempts: stored.attempts,
        newChat: stored.new_chat,
        sentAt: stored.sent_at === null ? null : Number(stored.sent_at),
      };
    };
    const waiting = { status: 'pending', attempts: 0, newChat: 0, sentAt: null };
    /** Wakes the queue and resolves once its drain ended with nothing it could claim. */
    const drain = async (wake: () => unknown = () => queue.wake(t.instance.id)) => {
      const reads = firstReads();
      await wake();
      await eventually('the drain to end', () => firstReads() > reads);
      await new Promise((resolve) => setImmediate(resolve));
    };
    const pace = (newChatsPerDay: number | null) => () =>
      queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay });
    const ids = (from: number) => relayed.slice(from).map(([id]) => id);
    /** A clean slate at `start`: no send of a test before counts or waits, no pair kept, a new queue. */
    const fresh = async (start: number) => {
      await queue?.stop();
      const db = t.services.store.db;
      await db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('messages').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('lid_mappings').where('instance_id', '=', t.instance.id).execute();
      relayed.length = 0;
      t.clock.set(start);
      queue = testQueue(t.clock, db.withPlugin(counting), t.instance.id, session);
    };

    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(async () => {
      await queue.stop();
      await t.close();
    });

    it("a user's sends by LID and by number wait for one slot and go on it together", async () => {
      const start = T0;
      await fresh(start);
      await drain(pace(1));
      await pair(1);
      // One relay opens a chat and fills the window; then user 1 waits by LID, user 2 by number, user 1 by number.
      await add('3EB0LIDSLOT0000000A0', 9, 'number');
      await add('3EB0LIDSLOT0000000A1', 1, 'lid');
      await add('3EB0LIDSLOT0000000A2', 2, 'number');
      await add('3EB0LIDSLOT0000000A3', 1, 'number');
      await drain();
      assert.deepEqual(ids(0), ['3EB0LIDSLOT0000000A0']);
      for (const id of ['3EB0LIDSLOT0000000A1', '3EB0LIDSLOT0000000A2', '3EB0LIDSLOT0000000A3'])
        assert.deepEqual(await row(id), waiting, `${id} waits for a slot`);

      // The slot frees: user 1 takes it with both sends, in their order; the first opens the chat, the second goes to
      // a known chat. User 2 waits for the next slot, not behind user 1's second form.
      const frees = start + DAY + 1;
      t.clock.set(frees);
      await drain();
      assert.deepEqual(relayed.slice(1), [
        ['3EB0LIDSLOT0000000A1', frees],
        ['3EB0LIDSLOT0000000A3', frees],
      ]);
      assert.deepEqual(await row('3EB0LIDSLOT0000000A1'), {
        status: 'sent',
        attempts: 1,
        newChat: 1,
        sentAt: frees,
      });
      assert.deepEqual(await row('3EB0LIDSLOT0000000A3'), {
        status: 'sent',
        attempts: 1,
        newChat: 0,
        sentAt: frees,
      });
      assert.deepEqual(await row('3EB0LIDSLOT0000000A2'), waiting);
      const next = frees + DAY + 1;
      t.clock.set(next);
      await drain();
      assert.deepEqual(ids(3), ['3EB0LIDSLOT0000000A2']);
    });

    it('a pair learned while both forms wait joins them; one not kept leaves two chats', async () => {
      const start = T0 + 10 * DAY;
      await fresh(start);
      await drain(pace(1));
      // Users 3 and 4 each wait by number, then by LID; no pair is kept yet.
      await add('3EB0LIDSLOT0000000B0', 9, 'number');
      await add('3EB0LIDSLOT0000000B1', 3, 'number');
      await add('3EB0LIDSLOT0000000B2', 3, 'lid');
      await add('3EB0LIDSLOT0000000B3', 4, 'number');
      await add('3EB0LIDSLOT0000000B4', 4, 'lid');
      await drain();
      assert.deepEqual(ids(0), ['3EB0LIDSLOT0000000B0']);
      // User 3's pair is learned while its sends wait: at the release they are one user.
      await pair(3);
      const frees = start + DAY + 1;
      t.clock.set(frees);
      await drain();
      assert.deepEqual(ids(1), ['3EB0LIDSLOT0000000B1', '3EB0LIDSLOT0000000B2']);
      assert.deepEqual((await row('3EB0LIDSLOT0000000B2')).newChat, 0, 'the LID send went to a known chat');
      // User 4's pair is not kept: its number and its LID are two chats, a slot each.
      t.clock.set(frees + DAY + 1);
      await drain();
      assert.deepEqual(ids(3), ['3EB0LIDSLOT0000000B3']);
      assert.deepEqual(await row('3EB0LIDSLOT0000000B4'), waiting);
      t.clock.set(frees + 2 * DAY + 2);
      await drain();
      assert.deepEqual(ids(4), ['3EB0LIDSLOT0000000B4']);
      assert.equal((await row('3EB0LIDSLOT0000000B4')).newChat, 1, 'a chat of its own as far as parley knew');
    });

    it('the window counts a user once whose number and LID each opened a chat before the pair was kept', async () => {
      const start = T0 + 20 * DAY;
      await fresh(start);
      await drain(pace(2));
      // User 5 by number, then by LID before its pair is kept: two relays counted as opening a chat.
      await add('3EB0LIDSLOT0000000C1', 5, 'number');
      await drain();
      t.clock.set(start + 1_000);
      await add('3EB0LIDSLOT0000000C2', 5, 'lid');
      await drain();
      assert.deepEqual(ids(0), ['3EB0LIDSLOT0000000C1', '3EB0LIDSLOT0000000C2']);
      const db = t.services.store.db;
      assert.equal(
        await countNewChatsSince(db, t.instance.id, start - DAY),
        2,
        'two chats as parley knew then',
      );
      assert.equal(await oldestNewChatSince(db, t.instance.id, start - DAY), start);
      // The pair is learned: one user, one chat opened, counted from its last relay in the window.
      await pair(5);
      assert.equal(await countNewChatsSince(db, t.instance.id, start - DAY), 1);
      assert.equal(await oldestNewChatSince(db, t.instance.id, start - DAY), start + 1_000);
      // So a cap of two leaves a slot to user 6, and user 7 waits for user 5's last relay to leave the window.
      t.clock.set(start + 2_000);
      await add('3EB0LIDSLOT0000000C3', 6, 'number');
      await add('3EB0LIDSLOT0000000C4', 7, 'number');
      await drain();
      assert.deepEqual(ids(2), ['3EB0LIDSLOT0000000C3']);
      assert.deepEqual(await row('3EB0LIDSLOT0000000C4'), waiting);
      t.clock.set(start + DAY + 1);
      await drain();
      assert.deepEqual(ids(3), [], "user 5's relay by LID is still in the window");
      t.clock.set(start + 1_000 + DAY + 1);
      await drain();
      assert.deepEqual(ids(3), ['3EB0LIDSLOT0000000C4']);
    });

    it("a user's send released on the next look takes no second slot while the user's slot is set aside", async () => {
      const start = T0 + 30 * DAY;
      await fresh(start);
      await queue.stop();
      const db = t.services.store.db;
      // User 8's send by number was released and is not claimed yet (its slot set aside); its pair is learned since,
      // and its send by LID waits, before user 9's.
      await pair(8);
      const runners = new Runners(
        t.clock,
        () => undefined,
        () => true,
      );
      const runner = runners.get(t.instance.id);
      runner.slotsReleased.set('3EB0LIDSLOT0000000D0', userJid(phoneOf(8)));
      runner.slotChats.add(userJid(phoneOf(8)));
      for (const [id, n] of [
        ['3EB0LIDSLOT0000000D1', 8],
        ['3EB0LIDSLOT0000000D2', 9],
      ] as const) {
        await insertSendJob(db, {
          ...textJob(t.instance.id, id, 'async', start),
          chat: n === 8 ? `${lidOf(n)}@lid` : userJid(phoneOf(n)),
          runAt: SLOT_WAIT + start,
        });
      }
      // A cap of two, nothing counted: one slot left. User 8's send by LID goes on user 8's slot, user 9's on it.
      await releaseFreedSlots(
        db,
        runners,
        t.instance.id,
        runner,
        { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 2 },
        undefined,
        start,
      );
      const runAts = await db
        .selectFrom('send_jobs')
        .select(['id', 'run_at'])
        .where('instance_id', '=', t.instance.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        runAts.map((row) => [row.id, Number(row.run_at)]),
        [
          ['3EB0LIDSLOT0000000D1', start],
          ['3EB0LIDSLOT0000000D2', start],
        ],
        'both released',
      );
      assert.deepEqual(
        [...runner.slotsReleased],
        [
          ['3EB0LIDSLOT0000000D0', userJid(phoneOf(8))],
          ['3EB0LIDSLOT0000000D1', userJid(phoneOf(8))],
          ['3EB0LIDSLOT0000000D2', userJid(phoneOf(9))],
        ],
      );
      assert.deepEqual(
        [...runner.slotChats],
        [userJid(phoneOf(8)), userJid(phoneOf(9))],
        'two users, two slots',
      );
      assert.equal(runner.slotCheckAt, Number.POSITIVE_INFINITY, 'none waits any more');
      // The claim of either of user 8's sends ends user 8's slot.
      assert.equal(claimedReleased(runner, '3EB0LIDSLOT0000000D1'), true);
      assert.deepEqual([...runner.slotChats], [userJid(phoneOf(9))]);
      runners.clearTimers();
    });
  });
}
