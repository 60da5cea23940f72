/**
 * A send job's outcome and its `MessageStatus` event commit in one transaction (docs/decisions/0076-status-with-its-
 * write.md): a store that refuses the event's row (a permanent error, injected through the store's test-only fault
 * hook, as a crash at that instant would leave it) leaves neither the job's change nor the event, and the change is
 * made again with its event once the store takes it. Written in two steps, the job would end `canceled` or `failed`
 * with no event, and its outcome would never reach a receiver. A session's connection change and its
 * `SessionStatus` commit together the same way: a logout whose event is refused leaves the account linked, its
 * pending sends not canceled (docs/decisions/0074-logout-cancels-pending-sends.md). Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { appFor, bad, OWN, PEER, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { checkViolation, createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { storeGone } from './support.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');

for (const dialect of testDialects()) {
  describe(`a send job's outcome commits with its MessageStatus event [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    /** While true, every statement writing an event row fails. */
    let failing = false;
    let refused = 0;
    /** While true, every update of a send job fails as with the store away (a connection reset). */
    let away = false;

    const job = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'attempts', 'last_error'])
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** The `MessageStatus` events of job `id` in the event log, oldest first. */
    const statusEvents = async (id: string) =>
      (
        await t.services.store.db
          .selectFrom('webhook_events')
          .select(['payload'])
          .where('instance_id', '=', t.instance.id)
          .where('type', '=', 'MessageStatus')
          .orderBy('sequence')
          .execute()
      )
        .map((row) => JSON.parse(row.payload).event)
        .filter((event) => event.id === id);

    /** A queued send (`Prefer: respond-async`) of text `body` to the peer. */
    const queuedSend = (body: string) =>
      t.call('POST', '/v1/messages/send', { phone: PEER, body }, { prefer: 'respond-async' });

    before(async () => {
      testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (failing && /insert into "webhook_events"/i.test(sql)) {
            refused += 1;
            throw checkViolation('webhook_events');
          }
          if (away && /^update "send_jobs"/i.test(sql)) throw storeGone();
        },
      });
      t = await appFor(dialect, { testStore });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(async () => {
      await t.close();
      await testStore.cleanup();
    });

    it('a cancel whose event the store refuses leaves the send pending; the next cancel writes both', async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const scheduled = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'cancel me', sendAt });
      assert.equal(scheduled.status, 202, JSON.stringify(scheduled.body));
      const id: string = scheduled.body.data.id;
      failing = true;
      const refusedBefore = refused;
      let res: Awaited<ReturnType<TestApp['call']>>;
      try {
        res = await t.call('POST', `/v1/messages/${id}/cancel`);
      } finally {
        failing = false;
      }
      assert.ok(refused > refusedBefore, 'the event row was refused');
      assert.equal(res.status, 500, JSON.stringify(res.body));
      assert.equal((await job(id)).status, 'pending', 'the cancel rolled back with its event');
      assert.deepEqual(await statusEvents(id), []);

      const again = await t.call('POST', `/v1/messages/${id}/cancel`);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal((await job(id)).status, 'canceled');
      assert.deepEqual(await statusEvents(id), [{ id, status: 'canceled', at: new Date(T0).toISOString() }]);
    });

    it('a cancel while the store cannot be reached answers 503 and leaves the send pending', async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const scheduled = await t.call('POST', '/v1/messages/send', {
        phone: PEER,
        body: 'cancel me too',
        sendAt,
      });
      assert.equal(scheduled.status, 202, JSON.stringify(scheduled.body));
      const id: string = scheduled.body.data.id;
      away = true;
      let res: Awaited<ReturnType<TestApp['call']>>;
      try {
        res = await t.call('POST', `/v1/messages/${id}/cancel`);
      } finally {
        away = false;
      }
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.equal((await job(id)).status, 'pending');
      assert.deepEqual(await statusEvents(id), []);
      const again = await t.call('POST', `/v1/messages/${id}/cancel`);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual(await statusEvents(id), [{ id, status: 'canceled', at: new Date(T0).toISOString() }]);
    });

    it('a synchronous send canceled through the API while it waits its turn is answered as canceled, not as logged out', async () => {
      // A long pace holds every send after the first in the queue.
      assert.equal(
        (await t.call('PUT', '/v1/session/pacing', { minIntervalMs: 600_000, jitterMs: 0 })).status,
        200,
      );
      try {
        const first = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'first' });
        assert.equal(first.status, 200, JSON.stringify(first.body));
        const waiting = t.call('POST', '/v1/messages/send', { phone: PEER, body: 'waiting' });
        const waitingId = await eventually('the waiting send stored', async () => {
          const row = await t.services.store.db
            .selectFrom('send_jobs')
            .select(['id'])
            .where('instance_id', '=', t.instance.id)
            .where('mode', '=', 'sync')
            .where('status', '=', 'pending')
            .executeTakeFirst();
          return row?.id;
        });
        const canceled = await t.call('POST', `/v1/messages/${waitingId}/cancel`);
        assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
        // The account did not log out: the request must not be told it did.
        assert.deepEqual((await waiting).body, bad(409, 'the message was canceled before its relay'));
      } finally {
        assert.equal((await t.call('PUT', '/v1/session/pacing', {})).status, 200);
      }
    });

    it('a queued send failed while the store refuses its event is failed again, with its event, once it takes it', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      const relay = session.send.bind(session);
      session.send = async () => {
        throw new DomainError('platform_refused', 'the platform rejected the message (error 479)');
      };
      try {
        failing = true;
        const refusedBefore = refused;
        const queued = await queuedSend('refused');
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const id: string = queued.body.data.id;
        await eventually('the failure’s event refused', () => refused > refusedBefore);
        // Whatever the job shows while the event is refused, it is not failed without its event.
        const meanwhile = await job(id);
        assert.notEqual(meanwhile.status, 'failed', 'failed without its event');
        failing = false;
        const events = await eventually('the failure’s event', async () => {
          const found = await statusEvents(id);
          return found.length > 0 ? found : undefined;
        });
        assert.deepEqual(events, [
          {
            id,
            status: 'failed',
            error: 'the platform rejected the message (error 479)',
            at: new Date(T0).toISOString(),
          },
        ]);
        const row = await job(id);
        assert.equal(row.status, 'failed');
        assert.equal(row.last_error, 'the platform rejected the message (error 479)');
      } finally {
        failing = false;
        session.send = relay;
      }
    });

    it('a platform pause whose event the store refuses is not stored either; the next one stores both', async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      const relay = session.send.bind(session);
      session.send = async () => {
        throw new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 30 });
      };
      const pausedUntil = async () =>
        (
          await t.services.store.db
            .selectFrom('send_pacing')
            .select('paused_until')
            .where('instance_id', '=', t.instance.id)
            .executeTakeFirst()
        )?.paused_until ?? null;
      const pauseEvents = async () =>
        (
          await t.services.store.db
            .selectFrom('webhook_events')
            .select(['payload'])
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'SessionStatus')
            .orderBy('sequence')
            .execute()
        )
          .map((row) => JSON.parse(row.payload).event)
          .filter((event) => event.status === 'paused');
      try {
        failing = true;
        const refusedBefore = refused;
        const first = await queuedSend('limited');
        assert.equal(first.status, 202, JSON.stringify(first.body));
        await eventually('the pause’s event refused', () => refused > refusedBefore);
        failing = false;
        assert.equal(await pausedUntil(), null, 'no pause stored without its event');
        assert.deepEqual(await pauseEvents(), []);

        // The refused send kept its place, its retry at the end the platform gave
        // (docs/decisions/0009-sends-as-jobs.md): the queue's next relay is that retry, refused again, and a send
        // accepted since waits behind it.
        const second = await queuedSend('limited again');
        assert.equal(second.status, 202, JSON.stringify(second.body));
        t.clock.advance(30_000);
        t.services.sendQueue.wake(t.instance.id);
        const events = await eventually('the pause’s event', async () => {
          const found = await pauseEvents();
          return found.length > 0 ? found : undefined;
        });
        assert.deepEqual(events, [
          {
            status: 'paused',
            reason: 'the platform rate-limited this account',
            until: new Date(T0 + 60_000).toISOString(),
            at: new Date(T0 + 30_000).toISOString(),
          },
        ]);
        assert.equal(Number(await pausedUntil()), T0 + 60_000);
        const limited = await job(first.body.data.id);
        assert.deepEqual([limited.status, limited.attempts], ['pending', 2], 'the first send, refused twice');
        assert.equal((await job(second.body.data.id)).attempts, 0, 'the second still behind it');
      } finally {
        failing = false;
        session.send = relay;
      }
    });

    // Last: it logs the sandbox account out.
    it('a logout whose SessionStatus row the store refuses does not leave the account unlinked without its event', async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const scheduled = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'later', sendAt });
      assert.equal(scheduled.status, 202, JSON.stringify(scheduled.body));
      const id: string = scheduled.body.data.id;
      /** Either the unlink was kept with its event and its cancel, or none of them was. */
      const consistent = async (message: string) => {
        const instance = await t.services.store.db
          .selectFrom('instances')
          .select(['jid'])
          .where('id', '=', t.instance.id)
          .executeTakeFirstOrThrow();
        const loggedOut = (await storedBodies(t, 'SessionStatus')).filter(
          (body) => body.event.status === 'logged_out',
        );
        const job = await t.services.store.db
          .selectFrom('send_jobs')
          .select('status')
          .where('instance_id', '=', t.instance.id)
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(
          { unlinked: instance.jid === null, events: loggedOut.length, job: job.status },
          instance.jid === null
            ? { unlinked: true, events: 1, job: 'canceled' }
            : { unlinked: false, events: 0, job: 'pending' },
          message,
        );
      };

      failing = true;
      const refusedBefore = refused;
      let res: Awaited<ReturnType<TestApp['call']>>;
      try {
        res = await t.call('POST', '/v1/session/logout');
      } finally {
        failing = false;
      }
      assert.ok(refused > refusedBefore, 'the event row was refused');

      await consistent(`the refused logout answered ${res.status} ${JSON.stringify(res.body)}`);

      // Logged out again once the store takes the row: whatever the first one kept, the pair is whole.
      const again = await t.call('POST', '/v1/session/logout');
      await consistent(`the second logout answered ${again.status} ${JSON.stringify(again.body)}`);
    });
  });
}
