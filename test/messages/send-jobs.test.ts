import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, captureEvents, messageRow, OWN, PEER, sendJobRow } from './support.ts';

/**
 * Sends as jobs (docs/decisions/0009-sends-as-jobs.md): a synchronous send stored before its relay, `Prefer:
 * respond-async`, `sendAt`, the job's status and cancel, pacing and the new chats' daily cap, on SQLite and
 * PostgreSQL. A synchronous send whose client stops waiting: send-waiters.test.ts.
 */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const ASYNC = { prefer: 'respond-async' };

for (const dialect of testDialects()) {
  describe(`sends as jobs: async, scheduled, status, cancel, pacing [${dialect}]`, () => {
    let t: TestApp;
    const job = (id: string) => sendJobRow(t, id);

    /** The `at` of each job's `MessageStatus sent` event among `captured`, in the order of `ids`, once all are there. */
    const sentTimes = (captured: ReturnType<typeof captureEvents>, ids: readonly string[], what: string) =>
      eventually(what, () => {
        const at = ids.map((id) => {
          const status = captured.events.find(
            ({ event }) => event.type === 'messageStatus' && event.id === id && event.status === 'sent',
          )?.event;
          return status?.type === 'messageStatus' ? status.at : Number.NaN;
        });
        return at.every(Number.isFinite) ? at : undefined;
      });

    before(async () => {
      t = await appFor(dialect);
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('a synchronous send is stored as a job under its id before the relay, and answers 200 Sent', async () => {
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'sync' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.details, 'Sent');
      const row = await job(res.body.data.id);
      assert.equal(row.status, 'sent');
      assert.equal(row.mode, 'sync');
      assert.equal(row.attempts, 1);
      assert.equal(Number(row.sent_at), T0);
      assert.ok(await messageRow(t, res.body.data.id), 'the message row exists');
    });

    it('Prefer: respond-async answers 202 Queued with a pending id that is then relayed under that id', async () => {
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'queued' }, ASYNC);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(res.headers['preference-applied'], 'respond-async');
      assert.deepEqual(res.body, {
        success: true,
        code: 202,
        data: { details: 'Queued', id: res.body.data.id, status: 'pending', sendAt: null },
      });
      assert.match(res.body.data.id, /^3EB0[0-9A-F]{18}$/);
      const id = res.body.data.id;
      await eventually('the queued send relayed', async () => (await job(id)).status === 'sent');
      const got = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(got.body.data.status, 'sent');
      assert.equal(got.body.data.state, 'sent');
      assert.equal(got.body.data.message.conversation, 'queued');
    });

    it('records a MessageStatus event for a queued send and none for a synchronous one (its answer is the outcome)', async () => {
      const statusEvents = async (id: string) =>
        (
          await t.services.store.db
            .selectFrom('webhook_events')
            .select(['type', 'payload'])
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'MessageStatus')
            .execute()
        ).filter((row) => JSON.parse(row.payload).event.id === id);
      const sync = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'answered' });
      assert.equal(sync.status, 200);
      assert.deepEqual(await statusEvents(sync.body.data.id), []);
      const queued = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'told' }, ASYNC);
      assert.equal(queued.status, 202);
      const id = queued.body.data.id;
      const rows = await eventually('the queued send’s MessageStatus', async () => {
        const found = await statusEvents(id);
        return found.length > 0 ? found : undefined;
      });
      assert.deepEqual(
        rows.map((row) => JSON.parse(row.payload).event),
        [{ id, status: 'sent', at: new Date(T0).toISOString() }],
      );
    });

    it('sendAt schedules: pending until due, shown by GET with its sendAt, relayed once the time comes', async () => {
      const sendAt = new Date(T0 + 3_600_000).toISOString();
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'later', sendAt });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(res.body.data.sendAt, sendAt);
      const id = res.body.data.id;
      const pending = await t.call('GET', `/v1/messages/${id}`);
      assert.equal(pending.status, 200);
      assert.equal(pending.body.data.status, 'pending');
      assert.equal(pending.body.data.sendAt, sendAt);
      assert.equal(pending.body.data.state, undefined);
      assert.equal(pending.body.data.message.conversation, 'later');
      t.services.sendQueue.wake(t.instance.id);
      assert.equal((await job(id)).status, 'pending', 'not relayed before it is due');
      t.clock.advance(3_600_000);
      t.services.sendQueue.wake(t.instance.id);
      await eventually('the scheduled send relayed', async () => (await job(id)).status === 'sent');
      t.clock.set(T0);
    });

    it('sendAt must be a future RFC 3339 time at most 30 days ahead', async () => {
      const send = (sendAt: string) =>
        t.call('POST', '/v1/messages/send', { phone: PEER, body: 'x', sendAt });
      assert.deepEqual(
        (await send('tomorrow')).body,
        bad(400, 'sendAt must be a date-time in RFC 3339 format'),
      );
      assert.deepEqual(
        (await send(new Date(T0 - 1000).toISOString())).body,
        bad(400, 'sendAt must be in the future'),
      );
      assert.deepEqual(
        (await send(new Date(T0 + 31 * 86_400_000).toISOString())).body,
        bad(400, 'sendAt must be at most 30 days ahead'),
      );
      const jobs = await t.services.store.db
        .selectFrom('send_jobs')
        .select('id')
        .where('payload', 'like', '%"x"%')
        .execute();
      assert.equal(jobs.length, 0, 'a refused send stores nothing');
    });

    it('cancel: a scheduled send becomes canceled and is never relayed; a sent one is 409; unknown ids 404', async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'cancel me', sendAt });
      const id = res.body.data.id;
      const canceled = await t.call('POST', `/v1/messages/${id}/cancel`);
      assert.deepEqual(canceled.body, {
        success: true,
        code: 200,
        data: { details: 'Canceled', id, status: 'canceled' },
      });
      assert.equal(
        (await t.call('POST', `/v1/messages/${id}/cancel`)).status,
        200,
        'canceling again answers the same',
      );
      assert.equal((await t.call('GET', `/v1/messages/${id}`)).body.data.status, 'canceled');
      t.clock.advance(600_000);
      t.services.sendQueue.wake(t.instance.id);
      const after = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'after' });
      assert.equal(after.status, 200);
      assert.equal((await job(id)).status, 'canceled');
      assert.equal(await messageRow(t, id), undefined, 'never relayed');
      t.clock.set(T0);

      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'done' });
      assert.deepEqual(
        (await t.call('POST', `/v1/messages/${sent.body.data.id}/cancel`)).body,
        bad(409, 'message already sent'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/messages/3EB0NOPE/cancel')).body,
        bad(404, 'message not found'),
      );
    });

    it('pacing: defaults off, validated, and spaces relays by minIntervalMs (times from MessageStatus events)', async () => {
      const captured = captureEvents(t);
      const get = await t.call('GET', '/v1/session/pacing');
      assert.deepEqual(get.body.data, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null, paused: null });
      const badPut = await t.call('PUT', '/v1/session/pacing', { minIntervalMs: -1 });
      assert.equal(badPut.status, 400);
      assert.match(badPut.body.error.message, /minIntervalMs/);
      const put = await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 5000, jitterMs: 0 });
      assert.deepEqual(put.body.data, {
        minIntervalMs: 5000,
        jitterMs: 0,
        newChatsPerDay: null,
        paused: null,
      });
      // The pace counts from the last relay (the test before sent one just now).
      t.clock.advance(5000);

      const ids: string[] = [];
      for (const body of ['p1', 'p2', 'p3']) {
        const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body }, ASYNC);
        assert.equal(res.status, 202);
        ids.push(res.body.data.id);
      }
      const [first, second, third] = ids as [string, string, string];
      await eventually('the first paced send', async () => (await job(first)).status === 'sent');
      t.services.sendQueue.wake(t.instance.id);
      assert.equal((await job(second)).status, 'pending', 'held back by the interval');
      for (const id of [second, third]) {
        t.clock.advance(5000);
        t.services.sendQueue.wake(t.instance.id);
        await eventually(`paced send ${id}`, async () => (await job(id)).status === 'sent');
      }
      // The job is marked sent just before its MessageStatus event is recorded: wait for the three events.
      const times = await sentTimes(captured, ids, 'three MessageStatus sent events');
      assert.deepEqual(
        times.map((time) => time - (times[0] ?? 0)),
        [0, 5000, 10000],
        'MessageStatus sent 5 s apart, in acceptance order',
      );
      await t.call('PUT', '/v1/session/pacing', {});
    });

    it('pacing counts a send whose engine failed after its message went out and was recorded', async () => {
      const captured = captureEvents(t);
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 5000, jitterMs: 0 });
      // The pace counts from the last relay, the test before's.
      t.clock.advance(5000);
      const relay = session.send.bind(session);
      let failures = 1;
      let threw: () => void = () => undefined;
      const thrown = new Promise<void>((resolve) => {
        threw = resolve;
      });
      session.send = async (message) => {
        const sent = await relay(message);
        if (failures-- > 0) {
          threw();
          throw new DomainError('timeout', 'the platform did not confirm the message in time');
        }
        return sent;
      };
      try {
        const ids: string[] = [];
        for (const body of ['out, then the engine failed', 'paced after it']) {
          const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body }, ASYNC);
          assert.equal(res.status, 202);
          ids.push(res.body.data.id);
        }
        const [first, second] = ids as [string, string];
        await eventually('the first send recorded sent', async () => (await job(first)).status === 'sent');
        // The relay takes the engine's failure (and its time) before the clock moves on.
        await thrown;
        await new Promise((resolve) => setImmediate(resolve));
        t.clock.advance(5000);
        t.services.sendQueue.wake(t.instance.id);
        await eventually('the paced send', async () => (await job(second)).status === 'sent');
        const times = await sentTimes(captured, ids, 'both MessageStatus sent events');
        assert.deepEqual(
          times.map((time) => time - (times[0] ?? 0)),
          [0, 5000],
          'the second relayed only once the interval after the first had passed',
        );
      } finally {
        session.send = relay;
        await t.call('PUT', '/v1/session/pacing', {});
      }
    });

    it('newChatsPerDay: a send opening a chat past the cap waits; sends to known chats go on', async () => {
      // The cap counts the chats opened in the last 24 h before it was set: the first send of these tests, at T0,
      // opened the chat with PEER.
      await t.call('PUT', '/v1/session/pacing', { newChatsPerDay: 2 });
      const first = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: '5511977770001', body: 'new 1' },
        ASYNC,
      );
      await eventually('first new chat', async () => (await job(first.body.data.id)).status === 'sent');
      const second = await t.call(
        'POST',
        '/v1/messages/send',
        { phone: '5511977770002', body: 'new 2' },
        ASYNC,
      );
      const known = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'known chat' }, ASYNC);
      await eventually(
        'the send to a known chat',
        async () => (await job(known.body.data.id)).status === 'sent',
      );
      const held = await job(second.body.data.id);
      assert.equal(held.status, 'pending');
      assert.equal(
        Number(held.run_at),
        SLOT_WAIT + T0 + 86_400_000 + 1,
        'waits for a slot, its place the first instant the day window no longer counts the first send',
      );
      assert.match(held.last_error ?? '', /2 new chats per day/);
      const sync = await t.call('POST', '/v1/messages/send', { phone: '5511977770003', body: 'new 3' });
      assert.equal(sync.status, 429, 'a synchronous send past the cap answers 429');
      await t.call('PUT', '/v1/session/pacing', {});
    });
  });
}
