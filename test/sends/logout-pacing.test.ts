/**
 * A logout ends the link of the account (docs/decisions/0013-pacing.md, docs/decisions/0074-logout-cancels-pending-
 * sends.md): what belongs to that account's number ends with it, in the logout's transaction, so none of it holds
 * the sends of the next account linked to the instance (perhaps another number): the platform's restriction pause,
 * its reach-out timelock, the chats the account opened (counted by the new-chats cap, also by a cap set later), and
 * the time of its last relay (from which the pace counts). The pace the user set on the instance stays. Before,
 * all of it survived: the next account's queued sends waited for the old account's pause or timelock, its sends
 * that opened a chat were held (or answered 429) by the chats the old account had opened, and its first send waited
 * for an interval counted from the old account's last relay. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import type { PacingSettings } from '../../src/domain/sends.ts';
import type { SendQueue, SendStatusReport } from '../../src/sends/queue.ts';
import { SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJob } from '../../src/store/send-jobs.ts';
import { countNewChatsSince, readPacing, writeNewChatLock, writePause } from '../../src/store/send-pacing.ts';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, testQueue, textJob } from './support.ts';

const T0 = Date.parse('2026-04-03T08:00:00.000Z');
const HOUR = 3_600_000;
const DAY = 86_400_000;
const TIMELOCK =
  'the platform restricts this account from messaging new contacts (463 reach-out timelock); existing chats still work';
/** How long a test waits for a send the old account's state would hold: it goes at once once the state is gone. */
const AT_ONCE_MS = 3_000;

/** A one-to-one chat no message was ever stored in (the fake session records none): a relay to it opens a chat. */
const newChat = (n: number) => `551190007${String(n).padStart(4, '0')}@s.whatsapp.net`;

/** The logged-in, connected state a login reports (a new hold on the instance). */
const LOGIN: EngineEvent = {
  type: 'connection',
  state: { connected: true, loggedIn: true, jid: null, phone: null, pushName: null },
};

for (const dialect of testDialects()) {
  describe(`a logout ends the account's restrictions and counts, not the instance's pace [${dialect}]`, () => {
    let t: TestApp;
    const queues: SendQueue[] = [];
    let refuse: DomainError | undefined;

    /** A queue of this node for a new instance of the app's org, relaying through a session that honours `refuse`. */
    const setup = async (nodeId = 'this-node') => {
      const instance = await t.newInstance();
      const reports: SendStatusReport[] = [];
      const relayed: string[] = [];
      const session = fakeSession(async (message) => {
        if (refuse) {
          const error = refuse;
          refuse = undefined;
          throw error;
        }
        relayed.push(message.id ?? '');
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      const queue = testQueue(
        t.clock,
        t.services.store.db,
        instance.id,
        session,
        async (_id, report) => {
          reports.push(report);
        },
        { nodeId },
      );
      queues.push(queue);
      /** Stores queued send `id` to `chat`, accepted now, and wakes the queue. */
      const add = async (id: string, chat: string) => {
        await insertSendJob(t.services.store.db, { ...textJob(instance.id, id, 'async', t.clock()), chat });
        queue.wake(instance.id);
      };
      const row = async (id: string) =>
        await t.services.store.db
          .selectFrom('send_jobs')
          .select(['status', 'run_at', 'sent_at', 'logged_out_at'])
          .where('instance_id', '=', instance.id)
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
      const sent = (id: string, ms = 10_000) =>
        eventually(`${id} relayed`, async () => (await row(id)).status === 'sent', ms);
      /**
       * The account's logout at the clock's time, as the recorder records it: the queue's derivation in one
       * transaction, then the after-commit hooks of the event and of what it derived.
       */
      const logout = async () => {
        const event: EngineEvent = { type: 'sessionStatus', status: 'logged_out', at: t.clock() };
        const derived = await t.services.store.db
          .transaction()
          .execute((trx) => queue.derive(trx, instance.id, event));
        for (const each of [event, ...derived]) queue.afterCommit(instance.id, each);
      };
      /** The next account's login: a new hold on the instance. */
      const login = () => queue.afterCommit(instance.id, LOGIN);
      return { instanceId: instance.id, queue, reports, relayed, add, row, sent, logout, login };
    };

    before(async () => {
      // An enterprise plan: each test links an instance of its own.
      t = await appFor(dialect);
    });
    afterEach(async () => {
      refuse = undefined;
      for (const queue of queues.splice(0)) await queue.stop();
    });
    after(() => t.close());

    it("the platform's rate-overlimit pause of the account that logged out holds nothing of the next one", async () => {
      t.clock.set(T0);
      const s = await setup();
      refuse = new DomainError('rate_limited', 'the platform rate-limited this account', {
        retryAfter: 3600,
      });
      await s.add('3EB0LP0PAUSE0000000001', newChat(1));
      await eventually('the pause', () => s.reports.find((r) => r.status === 'paused'));
      assert.deepEqual((await readPacing(t.services.store.db, s.instanceId)).pause, {
        reason: 'the platform rate-limited this account',
        until: T0 + HOUR,
      });

      t.clock.advance(1_000);
      await s.logout();
      const stored = await readPacing(t.services.store.db, s.instanceId);
      assert.equal(stored.pause, null, 'the pause ended with the logout');
      assert.equal(await s.queue.pause(s.instanceId), null);

      s.login();
      t.clock.advance(1_000);
      await s.add('3EB0LP0PAUSE0000000002', newChat(2));
      await s.sent('3EB0LP0PAUSE0000000002', AT_ONCE_MS);
      assert.deepEqual(s.relayed, ['3EB0LP0PAUSE0000000002']);
      assert.deepEqual(
        s.reports.filter((r) => r.kind === 'session').map((r) => r.status),
        ['paused'],
        'the logout ends the pause without a `resumed` of its own: nothing resumes, the account is gone',
      );
    });

    it("the reach-out timelock of the account that logged out holds none of the next one's new chats", async () => {
      t.clock.set(T0);
      const s = await setup();
      refuse = new DomainError('rate_limited', TIMELOCK, {
        retryAfter: 3600,
        restriction: 'reach-out-timelock',
      });
      await s.add('3EB0LP0LOCK00000000001', newChat(1));
      await eventually('the timelock', () => s.reports.find((r) => r.status === 'paused'));
      assert.deepEqual((await readPacing(t.services.store.db, s.instanceId)).newChatLock, {
        reason: TIMELOCK,
        until: T0 + HOUR,
      });

      t.clock.advance(1_000);
      await s.logout();
      assert.equal((await readPacing(t.services.store.db, s.instanceId)).newChatLock, null);

      s.login();
      t.clock.advance(1_000);
      await s.add('3EB0LP0LOCK00000000002', newChat(2));
      await s.sent('3EB0LP0LOCK00000000002', AT_ONCE_MS);
      assert.equal(Number((await s.row('3EB0LP0LOCK00000000002')).run_at), t.clock(), 'never held');
    });

    it("the chats the account opened do not count against the next account's new-chats cap; the cap stays", async () => {
      t.clock.set(T0);
      const s = await setup();
      const pace: PacingSettings = { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 };
      await s.queue.setPacing(s.instanceId, pace);
      await s.add('3EB0LP0CAP000000000001', newChat(1));
      await s.sent('3EB0LP0CAP000000000001');
      assert.equal(await countNewChatsSince(t.services.store.db, s.instanceId, T0 - DAY), 1);

      t.clock.advance(1_000);
      const loggedOutAt = t.clock();
      await s.logout();
      assert.equal(await countNewChatsSince(t.services.store.db, s.instanceId, t.clock() - DAY), 0);
      assert.equal(
        Number((await s.row('3EB0LP0CAP000000000001')).logged_out_at),
        loggedOutAt,
        "the account's relay marked with its logout",
      );
      assert.deepEqual(
        (await readPacing(t.services.store.db, s.instanceId)).pacing,
        pace,
        'the cap set stays',
      );

      s.login();
      t.clock.advance(1_000);
      await s.add('3EB0LP0CAP000000000002', newChat(2));
      await s.sent('3EB0LP0CAP000000000002', AT_ONCE_MS);
      // The cap counts the next account's own chats: its second new chat waits a day from its first.
      const firstOfNext = Number((await s.row('3EB0LP0CAP000000000002')).sent_at);
      await s.add('3EB0LP0CAP000000000003', newChat(3));
      await eventually(
        'the next account held by its own cap',
        async () =>
          Number((await s.row('3EB0LP0CAP000000000003')).run_at) === SLOT_WAIT + firstOfNext + DAY + 1,
      );
      assert.equal((await s.row('3EB0LP0CAP000000000003')).status, 'pending');
    });

    it('a cap set after the next account linked does not count the chats the account before it opened', async () => {
      t.clock.set(T0);
      const s = await setup();
      // No cap: the relay is not flagged as opening a chat; a cap set later looks back and flags it.
      await s.add('3EB0LP0LATE00000000001', newChat(1));
      await s.sent('3EB0LP0LATE00000000001');

      t.clock.advance(1_000);
      await s.logout();
      s.login();
      t.clock.advance(1_000);
      await s.queue.setPacing(s.instanceId, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 });
      assert.equal(await countNewChatsSince(t.services.store.db, s.instanceId, t.clock() - DAY), 0);
      await s.add('3EB0LP0LATE00000000002', newChat(2));
      await s.sent('3EB0LP0LATE00000000002', AT_ONCE_MS);
    });

    it("the pace counts its interval from the next account's own relays, not from the last of the account before", async () => {
      t.clock.set(T0);
      const s = await setup();
      const pace: PacingSettings = { minIntervalMs: 600_000, jitterMs: 0, newChatsPerDay: null };
      await s.queue.setPacing(s.instanceId, pace);
      await s.add('3EB0LP0PACE00000000001', newChat(1));
      await s.sent('3EB0LP0PACE00000000001');

      t.clock.advance(1_000);
      await s.logout();
      s.login();
      t.clock.advance(1_000);
      await s.add('3EB0LP0PACE00000000002', newChat(2));
      await s.sent('3EB0LP0PACE00000000002', AT_ONCE_MS);
      // The interval the user set holds the next account's relays from its own first one.
      await s.add('3EB0LP0PACE00000000003', newChat(3));
      t.clock.advance(599_000);
      s.queue.wake(s.instanceId);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal((await s.row('3EB0LP0PACE00000000003')).status, 'pending', 'within the interval');
      t.clock.advance(1_000);
      s.queue.wake(s.instanceId);
      await s.sent('3EB0LP0PACE00000000003');
      assert.deepEqual((await readPacing(t.services.store.db, s.instanceId)).pacing, pace);
    });

    it('a logout whose transaction rolls back ends nothing: the restrictions and the count go with its event', async () => {
      t.clock.set(T0);
      const s = await setup();
      await s.queue.setPacing(s.instanceId, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 });
      await s.add('3EB0LP0ROLLBACK0000001', newChat(1));
      await s.sent('3EB0LP0ROLLBACK0000001');
      const pause = { reason: 'rate-overlimit (429)', until: T0 + HOUR };
      await writePause(t.services.store.db, s.instanceId, pause, T0);
      t.clock.advance(1_000);
      const event: EngineEvent = { type: 'sessionStatus', status: 'logged_out', at: t.clock() };
      await assert.rejects(
        t.services.store.db.transaction().execute(async (trx) => {
          await s.queue.derive(trx, s.instanceId, event);
          throw new Error('the commit failed');
        }),
        /the commit failed/,
      );
      assert.deepEqual((await readPacing(t.services.store.db, s.instanceId)).pause, pause);
      assert.equal(await countNewChatsSince(t.services.store.db, s.instanceId, t.clock() - DAY), 1);
      assert.equal((await s.row('3EB0LP0ROLLBACK0000001')).logged_out_at, null);
    });

    it('another node that read the pause reads it ended: at its next hold, and at once while it holds no session', async () => {
      t.clock.set(T0);
      const s = await setup();
      const pause = { reason: 'rate-overlimit (429)', until: T0 + HOUR };
      const lock = { reason: TIMELOCK, until: T0 + HOUR };
      await writePause(t.services.store.db, s.instanceId, pause, T0);
      await writeNewChatLock(t.services.store.db, s.instanceId, lock, T0);
      // A node that held the instance before (it will hold it again), and one that serves a read without holding it.
      const holder = testQueue(
        t.clock,
        t.services.store.db,
        s.instanceId,
        fakeSession(async () => ({ id: '', timestamp: 0 })),
        undefined,
        {
          nodeId: 'other-node',
        },
      );
      const reader = testQueue(
        t.clock,
        t.services.store.db,
        s.instanceId,
        fakeSession(async () => ({ id: '', timestamp: 0 })),
        undefined,
        {
          nodeId: 'reading-node',
          session: () => undefined,
        },
      );
      queues.push(holder, reader);
      for (const other of [holder, reader]) {
        assert.deepEqual(await other.pause(s.instanceId), pause);
        assert.deepEqual((await other.pacing(s.instanceId)).newChatLock, lock);
      }

      t.clock.advance(1_000);
      await s.logout();
      assert.equal(await reader.pause(s.instanceId), null, 'a node holding no session reads the store');
      assert.equal((await reader.pacing(s.instanceId)).newChatLock, null);
      holder.afterCommit(s.instanceId, LOGIN);
      assert.equal(await holder.pause(s.instanceId), null, 'the next hold reads the store again');
      assert.equal((await holder.pacing(s.instanceId)).newChatLock, null);
    });
  });

  describe(`a logout and another number linked, through the API [${dialect}]`, () => {
    let t: TestApp;
    /** The number linked to the instance after the logout. */
    const NEXT_OWN = '5511999990019';

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it("the next account keeps the instance's pace, not the account's pause, timelock and opened chats", {
      timeout: 60_000,
    }, async () => {
      const pace = { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 };
      assert.equal((await t.call('PUT', '/v1/session/pacing', pace)).status, 200);
      const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'opens a chat' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      // The platform restricted the number meanwhile (the sandbox never does: stored as the holder stores it), and
      // the holder reads it at its next hold.
      const until = T0 + HOUR;
      await writePause(t.services.store.db, t.instance.id, { reason: 'rate-overlimit (429)', until }, T0);
      await writeNewChatLock(t.services.store.db, t.instance.id, { reason: TIMELOCK, until }, T0);
      t.services.sendQueue.afterCommit(t.instance.id, LOGIN);
      const restricted = await t.call('GET', '/v1/session/pacing');
      assert.deepEqual(restricted.body.data, {
        ...pace,
        paused: { reason: 'rate-overlimit (429)', until: new Date(until).toISOString() },
      });

      t.clock.advance(1_000);
      assert.equal((await t.call('POST', '/v1/session/logout')).status, 200);
      assert.deepEqual((await t.call('GET', '/v1/session/pacing')).body.data, { ...pace, paused: null });

      await loginSandbox(t, NEXT_OWN);
      t.clock.advance(1_000);
      assert.deepEqual((await t.call('GET', '/v1/session/pacing')).body.data, { ...pace, paused: null });
      assert.equal((await t.call('GET', '/v1/session/status')).body.data.paused, undefined);
      const stored = await readPacing(t.services.store.db, t.instance.id);
      assert.deepEqual([stored.pause, stored.newChatLock], [null, null]);
      // The next account opens its first chat: the chat the account before it opened does not count.
      const next = await t.call('POST', '/v1/messages/send', { phone: '5511999990003', body: 'a new chat' });
      assert.equal(next.status, 200, JSON.stringify(next.body));
      // Its own count does: a second new chat the same day is past the cap.
      const past = await t.call('POST', '/v1/messages/send', { phone: '5511999990004', body: 'another' });
      assert.equal(past.status, 429, JSON.stringify(past.body));
      await t.call('PUT', '/v1/session/pacing', {});
    });
  });
}
