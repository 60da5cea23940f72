/**
 * Send writes whose PostgreSQL connection really breaks while their commit still runs on the server
 * (docs/decisions/0011-store-faults.md): the client gives up ("Connection terminated") and the server goes on and
 * commits. A deferred constraint trigger holds the commit for 0.6 s, and the test closes the connection's socket as
 * soon as the statement (an autocommit one: its commit is held), or its transaction's `commit`, is written. Each send
 * must still go out once, with one job row and the answer of a stored send; a key's claim that committed unanswered
 * must not leave the key "in progress" for a request that is not running; a cancel, a relay's `sent` mark and a
 * platform pause are stored once with one status event each, and a synchronous send whose mark rode on its batch's
 * advance is answered once with none, whether its connection broke as the batch committed or before. Only PostgreSQL (TEST_DATABASE_URL): an embedded SQLite
 * store has no connection to lose.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { appFor, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import {
  adminSql,
  breakConnections,
  holdCommitFunction,
  holdCommitTrigger,
} from '../support/broken-connections.ts';
import { eventually } from '../support/eventually.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const ASYNC = { prefer: 'respond-async' };
/** Every body the tests send carries this mark: the trigger holds the commit of a job row that has it. */
const MARK = 'held-at-commit';
/** The idempotency keys whose kept answer's commit the trigger holds start with this. */
const HELD_KEEP = 'held-keep-';
/** A body whose job's `sent` mark has its commit held. */
const SENT_MARK = 'held-at-sent';
/** A body whose job's `sent` mark rides on its sequence's advance and has its commit held. */
const RIDE_MARK = 'held-at-ride';
/** The idempotency keys whose claim's commit the trigger holds start with this. */
const HELD_KEY = 'held-key-';

for (const dialect of testDialects().filter((each) => each === 'postgres')) {
  describe(`a send whose connection breaks while its commit runs on the server [${dialect}]`, () => {
    let testStore: TestStore;
    let t: TestApp;
    /** While set, the next statement written whose text matches it is followed by its connection's close. */
    let breakAfter: RegExp | undefined;
    /**
     * While set, the next `commit` written on a connection that wrote a statement whose text matches it is followed
     * by its connection's close.
     */
    let breakCommitAfter: RegExp | undefined;
    const carrying = new WeakSet<object>();
    let broken = 0;
    let restore: (() => void) | undefined;

    const jobRows = (id: string) =>
      t.services.store.db
        .selectFrom('send_jobs')
        .select(['id', 'status', 'attempts'])
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .execute();
    /** The instance's `MessageStatus` event bodies that name message `id`. */
    const statusEvents = async (id: string) =>
      (
        await t.services.store.db
          .selectFrom('webhook_events')
          .select(['payload'])
          .where('instance_id', '=', t.instance.id)
          .where('type', '=', 'MessageStatus')
          .execute()
      )
        .map((row) => JSON.parse(row.payload))
        .filter((payload) => JSON.stringify(payload).includes(id));
    /** The ids of the instance's own `Message` events whose text is `body` (one per message relayed). */
    const ownMessages = async (body: string) =>
      (
        await t.services.store.db
          .selectFrom('webhook_events')
          .select(['payload'])
          .where('instance_id', '=', t.instance.id)
          .where('type', '=', 'Message')
          .execute()
      )
        .map((row) => JSON.parse(row.payload))
        .filter(
          (payload) =>
            payload.event.info.messageSource.isFromMe && payload.event.message?.conversation === body,
        )
        .map((payload) => payload.event.info.id as string);
    /** Calls `POST /v1/messages/send` with the connection of the first statement matching `statement` closed. */
    const sendBreaking = async (statement: RegExp, body: unknown, headers?: Record<string, string>) => {
      const before = broken;
      breakAfter = statement;
      try {
        return await t.call('POST', '/v1/messages/send', body, headers);
      } finally {
        breakAfter = undefined;
        assert.equal(broken, before + 1, 'a connection broke as it committed');
      }
    };

    /**
     * Sends `body`, closing the connection as the commit of the transaction that wrote a statement matching
     * `statement` is written (a new job's insert commits with the read of its instance's account generation,
     * docs/decisions/0074-logout-cancels-pending-sends.md).
     */
    const sendBreakingCommit = async (statement: RegExp, body: unknown, headers?: Record<string, string>) => {
      const before = broken;
      breakCommitAfter = statement;
      try {
        return await t.call('POST', '/v1/messages/send', body, headers);
      } finally {
        breakCommitAfter = undefined;
        assert.equal(broken, before + 1, 'a connection broke as it committed');
      }
    };

    before(async () => {
      testStore = await createTestStore(dialect);
      const schema = testStore.schema ?? 'public';
      await adminSql(testStore, [
        ...holdCommitFunction(schema),
        holdCommitTrigger(schema, 'hold_commit', 'insert', 'send_jobs', `new.payload like '%${MARK}%'`),
        holdCommitTrigger(schema, 'hold_commit', 'insert', 'idempotency_keys', `new.key like '${HELD_KEY}%'`),
        holdCommitTrigger(
          schema,
          'hold_keep',
          'update',
          'idempotency_keys',
          `new.status is not null and new.key like '${HELD_KEEP}%'`,
        ),
        holdCommitTrigger(
          schema,
          'hold_pause',
          'insert or update',
          'send_pacing',
          'new.paused_until is not null',
        ),
        holdCommitTrigger(schema, 'hold_cancel', 'update', 'send_jobs', `new.status = 'canceled'`),
        holdCommitTrigger(
          schema,
          'hold_sent',
          'update',
          'send_jobs',
          `new.status = 'sent' and new.payload like '%${SENT_MARK}%'`,
        ),
        // The mark drops the payload: the job is told by the payload it had.
        holdCommitTrigger(
          schema,
          'hold_ride',
          'update',
          'send_jobs',
          `new.status = 'sent' and old.payload like '%${RIDE_MARK}%'`,
        ),
      ]);
      restore = breakConnections((text, client) => {
        if (breakCommitAfter) {
          if (breakCommitAfter.test(text)) carrying.add(client);
          else if (/^\s*commit/i.test(text) && carrying.has(client)) {
            breakCommitAfter = undefined;
            carrying.delete(client);
            broken += 1;
            return 'after';
          }
        }
        if (breakAfter?.test(text)) {
          breakAfter = undefined;
          broken += 1;
          return 'after';
        }
        return undefined;
      });
      t = await appFor(dialect, { testStore });
      t.clock.set(T0);
      await loginSandbox(t, OWN);
    });
    after(async () => {
      restore?.();
      await t.close();
      await testStore.cleanup();
    });

    it('a synchronous send whose job insert broke as it committed answers 200 and goes out once', async () => {
      const body = `${MARK} sync`;
      const res = await sendBreakingCommit(/^insert into "send_jobs"/i, { phone: PEER, body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      assert.deepEqual(await jobRows(id), [{ id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(await ownMessages(body), [id]);
    });

    it('a queued send whose job insert broke as it committed answers 202 and goes out once', async () => {
      const body = `${MARK} async`;
      const res = await sendBreakingCommit(/^insert into "send_jobs"/i, { phone: PEER, body }, ASYNC);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      await eventually('relayed', async () => (await jobRows(id))[0]?.status === 'sent');
      assert.deepEqual(await jobRows(id), [{ id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(await ownMessages(body), [id]);
    });

    it("a send whose key's claim broke as it committed runs, and its retry replays its answer", async () => {
      const body = 'claimed unanswered';
      const headers = { 'idempotency-key': `${HELD_KEY}1` };
      const first = await sendBreaking(/^insert into "idempotency_keys"/i, { phone: PEER, body }, headers);
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const id: string = first.body.data.id;
      const again = await t.call('POST', '/v1/messages/send', { phone: PEER, body }, headers);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.body, first.body);
      assert.deepEqual(await ownMessages(body), [id], 'sent once');
    });

    it("a send whose key's kept answer broke as it committed answers once: its retry replays it", async () => {
      const body = 'kept unanswered';
      const headers = { 'idempotency-key': `${HELD_KEEP}1` };
      const first = await sendBreaking(
        /^update "idempotency_keys" set "status"/i,
        { phone: PEER, body },
        headers,
      );
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const id: string = first.body.data.id;
      const again = await t.call('POST', '/v1/messages/send', { phone: PEER, body }, headers);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.body, first.body);
      assert.deepEqual(await ownMessages(body), [id], 'sent once');
    });

    it("a cancel whose transaction's commit broke answers canceled, with one MessageStatus canceled", async () => {
      const sendAt = new Date(T0 + 600_000).toISOString();
      const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'cancel me', sendAt });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      const before = broken;
      breakCommitAfter = /^update "send_jobs"/i;
      let canceled: Awaited<ReturnType<TestApp['call']>>;
      try {
        canceled = await t.call('POST', `/v1/messages/${id}/cancel`);
      } finally {
        breakCommitAfter = undefined;
      }
      assert.equal(broken, before + 1, 'a connection broke as it committed');
      assert.deepEqual(canceled.body, {
        success: true,
        code: 200,
        data: { details: 'Canceled', id, status: 'canceled' },
      });
      assert.deepEqual(await jobRows(id), [{ id, status: 'canceled', attempts: 0 }]);
      const statuses = await statusEvents(id);
      assert.equal(statuses.length, 1, JSON.stringify(statuses));
    });

    it("a queued send whose relay's sent mark broke as it committed is recorded once: one Message, one MessageStatus sent", async () => {
      const body = `${SENT_MARK} queued`;
      const before = broken;
      // The relay's own finish, or the mark of the transaction recording the message, whichever marks it first.
      breakCommitAfter = /^update "?send_jobs"? set "?status"? = (\$\d+|'sent'), "?sent_at"?/;
      let res: Awaited<ReturnType<TestApp['call']>>;
      let id: string;
      try {
        res = await t.call('POST', '/v1/messages/send', { phone: PEER, body }, ASYNC);
        assert.equal(res.status, 202, JSON.stringify(res.body));
        id = res.body.data.id;
        await eventually('relayed', async () => (await jobRows(id))[0]?.status === 'sent');
        await eventually('the mark committed', () => broken > before);
      } finally {
        breakCommitAfter = undefined;
      }
      assert.equal(broken, before + 1, 'a connection broke as it committed');
      assert.deepEqual(await jobRows(id), [{ id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(await ownMessages(body), [id]);
      const statuses = await statusEvents(id);
      assert.equal(statuses.length, 1, JSON.stringify(statuses));
    });

    it("a synchronous send whose mark rode on its batch's advance and whose commit broke answers 200 once, with no status event", async () => {
      // The request waits for the job, so its `sent` mark is made by the sequence's advance
      // (docs/decisions/0087-sent-marks-with-the-advance.md); the batch's commit is then held and its answer lost.
      const body = `${RIDE_MARK} sync`;
      const before = broken;
      breakCommitAfter = /^with marked as/;
      let res: Awaited<ReturnType<TestApp['call']>>;
      try {
        res = await t.call('POST', '/v1/messages/send', { phone: PEER, body });
      } finally {
        breakCommitAfter = undefined;
      }
      assert.equal(broken, before + 1, 'a connection broke as it committed');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      assert.deepEqual(await jobRows(id), [{ id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(await ownMessages(body), [id]);
      assert.deepEqual(await statusEvents(id), [], 'the answer carried the outcome');
    });

    it("a synchronous send whose batch's connection broke after the advance that carried its mark answers 200 once", async () => {
      // The connection closes once the advance with the job's `sent` mark is written, before the commit: the server
      // rolls the batch back, mark and all (docs/decisions/0087-sent-marks-with-the-advance.md).
      const body = `${RIDE_MARK} rolled back`;
      const res = await sendBreaking(/^with marked as/, { phone: PEER, body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id: string = res.body.data.id;
      assert.deepEqual(await jobRows(id), [{ id, status: 'sent', attempts: 1 }]);
      assert.deepEqual(await statusEvents(id), [], 'the answer carried the outcome');
      assert.deepEqual(
        await ownMessages(body),
        [id],
        'its message recorded once, by the try after the rollback',
      );
    });

    it("a platform pause whose transaction's commit broke is stored once, with one SessionStatus paused", async () => {
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session, 'the instance has a session');
      const relay = session.send.bind(session);
      session.send = async () => {
        throw new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 30 });
      };
      const pausedEvents = async () =>
        (
          await t.services.store.db
            .selectFrom('webhook_events')
            .select(['payload'])
            .where('instance_id', '=', t.instance.id)
            .where('type', '=', 'SessionStatus')
            .execute()
        )
          .map((row) => JSON.parse(row.payload).event)
          .filter((event) => event.status === 'paused');
      const before = broken;
      breakCommitAfter = /^insert into "send_pacing"/i;
      try {
        const res = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'limited' }, ASYNC);
        assert.equal(res.status, 202, JSON.stringify(res.body));
        const id: string = res.body.data.id;
        await eventually(
          'the pause stored',
          async () =>
            (
              await t.services.store.db
                .selectFrom('send_pacing')
                .select('paused_until')
                .where('instance_id', '=', t.instance.id)
                .executeTakeFirst()
            )?.paused_until,
        );
        await eventually('the pause recorded', async () => (await pausedEvents()).length > 0);
        await eventually('the pause written', () => broken > before);
        assert.equal(broken, before + 1, 'a connection broke as it committed');
        assert.deepEqual(await jobRows(id), [{ id, status: 'pending', attempts: 1 }]);
        // Whatever the queue does next with the pause in force, its event is there once.
        await t.services.recorder.drain();
        assert.deepEqual(await pausedEvents(), [
          {
            status: 'paused',
            reason: 'the platform rate-limited this account',
            until: new Date(T0 + 30_000).toISOString(),
            at: new Date(T0).toISOString(),
          },
        ]);
      } finally {
        breakCommitAfter = undefined;
        session.send = relay;
      }
    });
  });
}
