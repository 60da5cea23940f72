/**
 * The new-chats-per-day cap's two reads of users over many sends (docs/decisions/0013-pacing.md), pinned against a
 * model of the rule written here: a user is the chat sent to, a `<lid>@lid` whose pair parley keeps counting as the
 * user of that pair's phone JID (docs/decisions/0038-lid-mappings.md). The release of the sends waiting for a slot
 * (src/store/send-job-slots.ts `releaseSlotWaiters`) takes the first users in the order their first waiting send
 * waits (`run_at`, then `seq`) and every waiting send of theirs; the window's count (src/store/send-pacing.ts
 * `countNewChatsSince`) counts each user once, up to the cap asked. A backlog of sends by number and by LID to users
 * with and without a kept pair, with ties in `run_at` and `seq` out of acceptance order, is released a few users at a
 * time and compared with the model at each step. The statements were rewritten to cost linear in the sends they read
 * (before: the release compared every waiting send with every one before it); these tests hold their answers to the
 * rule across that. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { userJid } from '../../src/domain/messages.ts';
import { encodeSendPayload } from '../../src/sends/payload.ts';
import { createInstance } from '../../src/store/instances.ts';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { releaseSlotWaiters, SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJobs, type NewSendJob } from '../../src/store/send-jobs.ts';
import { countNewChatsSince } from '../../src/store/send-pacing.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { textJob } from './support.ts';

const T0 = Date.parse('2026-09-01T08:00:00.000Z');
const DAY = 86_400_000;
/** Users 0..USERS-1; those whose number is below KEPT have their pair kept. */
const USERS = 30;
const KEPT = 20;

const phoneOf = (n: number) => `55118888${String(n).padStart(4, '0')}`;
const lidOf = (n: number) => `7${String(n).padStart(4, '0')}000222`;

/** A deterministic stream of whole numbers below `n` (a linear congruential generator). */
function numbers(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return Math.floor((state / 2 ** 31) * n);
  };
}

/** One send of the model: its id, chat, place and order, and the user the rule names. */
interface Planned {
  id: string;
  chat: string;
  runAt: number;
  seq: number;
  user: string;
}

/** `count` sends to random users by number or by LID; `places` distinct `run_at` values make ties. */
function plan(prefix: string, count: number, places: number, seed: number): Planned[] {
  const next = numbers(seed);
  const sends: Planned[] = [];
  for (let i = 0; i < count; i++) {
    const n = next(USERS);
    const byLid = next(2) === 1;
    const chat = byLid ? `${lidOf(n)}@lid` : userJid(phoneOf(n));
    const user = byLid && n >= KEPT ? chat : userJid(phoneOf(n));
    // Acceptance order (`seq`, distinct) runs against the id order, and ties in `run_at` are frequent.
    sends.push({
      id: `${prefix}${i}`,
      chat,
      runAt: next(places) * 1000,
      seq: 1 + ((i * 7919) % count),
      user,
    });
  }
  return sends;
}

const inWaitOrder = (a: Planned, b: Planned) => a.runAt - b.runAt || a.seq - b.seq;

for (const dialect of testDialects()) {
  describe(`the cap's users over a backlog of sends by number and by LID [${dialect}]`, () => {
    let ts: TestStore;
    let instanceId = '';

    const store = async (sends: readonly Planned[], base: number) => {
      const jobs: NewSendJob[] = sends.map((send) => ({
        ...textJob(instanceId, send.id, 'async', T0),
        seq: send.seq,
        chat: send.chat,
        payload: encodeSendPayload({
          to: send.chat,
          content: { kind: 'text', text: send.id, linkPreview: false },
        }),
        runAt: base + send.runAt,
      }));
      await insertSendJobs(ts.store.db, jobs);
    };

    before(async () => {
      ts = await createTestStore(dialect);
      const org = await createOrganization(ts.store.db, { name: 'slot users', plan: 'pro' });
      instanceId = (await createInstance(ts.store.db, { orgId: org.id, env: 'test', name: 's' })).id;
      await upsertLidMappings(
        ts.store.db,
        instanceId,
        Array.from({ length: KEPT }, (_, n) => ({ lid: lidOf(n), phone: phoneOf(n) })),
        T0,
      );
    });
    after(() => ts.cleanup());

    it('releases the first users in wait order, each with all their waiting sends, a few users at a time', async () => {
      const sends = plan('w', 160, 40, 7);
      await store(sends, SLOT_WAIT + T0);
      const waiting = [...sends].sort(inWaitOrder);
      const limits = [1, 2, 3, 1, 5, 4, 2, 1, 6, 3];
      let step = 0;
      while (waiting.length > 0) {
        const limit = limits[step % limits.length] ?? 1;
        step += 1;
        const users: string[] = [];
        for (const send of waiting) {
          if (users.length === limit) break;
          if (!users.includes(send.user)) users.push(send.user);
        }
        const expected = waiting.filter((send) => users.includes(send.user));
        const { released, more } = await releaseSlotWaiters(ts.store.db, instanceId, T0 + step, limit);
        assert.deepEqual(
          released,
          expected.map((send) => ({ id: send.id, chat: send.chat, user: send.user })),
          `step ${step}, limit ${limit}`,
        );
        assert.equal(more, users.length === limit, `step ${step}: more`);
        for (const send of expected) waiting.splice(waiting.indexOf(send), 1);
      }
      assert.ok(step > 5, `released over ${step} steps`);
      const rows = await ts.store.db
        .selectFrom('send_jobs')
        .select(['id', 'run_at'])
        .where('instance_id', '=', instanceId)
        .execute();
      assert.deepEqual(
        rows
          .map((row) => [row.id, Number(row.run_at)])
          .sort(([a], [b]) => String(a).localeCompare(String(b))),
        sends
          .map((send) => [send.id, T0 + send.runAt])
          .sort(([a], [b]) => String(a).localeCompare(String(b))),
        'each released send is back at its place',
      );
      assert.deepEqual(await releaseSlotWaiters(ts.store.db, instanceId, T0, 3), {
        released: [],
        more: false,
      });
    });

    it("counts the window's users once each, up to the cap asked; a logged-out account's relays and older ones not", async () => {
      await ts.store.db.deleteFrom('send_jobs').where('instance_id', '=', instanceId).execute();
      const sent = plan('s', 120, 60, 11);
      await store(sent, T0);
      await ts.store.db
        .updateTable('send_jobs')
        .set((eb) => ({ status: 'sent', new_chat: 1, sent_at: eb.ref('run_at') }))
        .where('instance_id', '=', instanceId)
        .execute();
      // Relays the window leaves out: one a day old, one of an account that logged out since, one not opening a chat.
      const left = plan('x', 3, 1, 13);
      await store(left, T0);
      const mark = (
        id: string,
        values: { sent_at: number; new_chat: number; logged_out_at: number | null },
      ) =>
        ts.store.db
          .updateTable('send_jobs')
          .set({ status: 'sent', ...values })
          .where('instance_id', '=', instanceId)
          .where('id', '=', id)
          .execute();
      await mark('x0', { sent_at: T0 - DAY - 1, new_chat: 1, logged_out_at: null });
      await mark('x1', { sent_at: T0 + 500, new_chat: 1, logged_out_at: T0 + 1000 });
      await mark('x2', { sent_at: T0 + 500, new_chat: 0, logged_out_at: null });
      const since = T0 - DAY;
      const users = new Set(sent.map((send) => send.user)).size;
      assert.ok(users > KEPT && users < sent.length, `${users} users`);
      assert.equal(await countNewChatsSince(ts.store.db, instanceId, since), users);
      for (const cap of [1, 7, users - 1, users, users + 1, 500]) {
        assert.equal(
          await countNewChatsSince(ts.store.db, instanceId, since, cap),
          Math.min(cap, users),
          `cap ${cap}`,
        );
      }
      const later = T0 + 30_000;
      const usersLater = new Set(sent.filter((send) => T0 + send.runAt >= later).map((send) => send.user))
        .size;
      assert.equal(await countNewChatsSince(ts.store.db, instanceId, later), usersLater);
      assert.equal(await countNewChatsSince(ts.store.db, instanceId, later, 3), Math.min(3, usersLater));
    });
  });
}
