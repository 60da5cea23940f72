/**
 * A PostgreSQL server that refuses writes (docs/decisions/0011-store-faults.md): after a failover, the address parley
 * connects to can reach a server that is a standby, or the old primary demoted to one, until its DNS name moves; each
 * write is refused with SQLSTATE 25006 (`read_only_sql_transaction`). Here the test's database is made read-only for
 * new sessions (`default_transaction_read_only`) and the app's sessions are ended, so the pool reconnects to a server
 * that refuses writes; later new sessions may write again, as on the promoted server. Requests answer 503 with
 * `Retry-After` meanwhile, an inbound event waits and is stored and delivered once, and the connections that were
 * refused are replaced, so writes work again without a restart.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import pg from 'pg';
import { STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import { type ApiResponse, createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { allDelivered, configureWebhook, messageIdsWith } from '../webhooks/support.ts';

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`a PostgreSQL server that refuses writes (${dialect})`, () => {
    let receiver: Receiver;
    let t: TestApp;
    let admin: pg.Client;
    let database: string;
    let testStore: TestStore;
    let recordTries = 0;

    beforeEach(async () => {
      receiver = await startReceiver();
      recordTries = 0;
      testStore = await createTestStore(dialect, {
        // The writes an inbound message waits on: the sender's LID, which the sandbox reveals with the first message
        // of a user in a session (a lid-mapping event, recorded before the message), the sandbox's own state (its
        // credential store), then the event recorder's first statement (the instance's sequence row). One per try.
        // Counting only the last two counted, while the LID waited, the credential writes of the refused sends
        // retried in the background, which may have ended: the wait below then ran out.
        faults: (text) => {
          if (/insert into "(lid_mappings|webhook_state|engine_auth)"/i.test(text)) recordTries++;
        },
      });
      t = await createTestApp({
        testStore,
        outboundCa: TEST_CA,
        webhookWorker: { pollIntervalMs: 25 },
        env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_SCHEDULE: '1,2,3' },
      });
      await loginSandbox(t);
      await configureWebhook(t, receiver.url);
      database = new URL((t.testStore.database as { url: string }).url).pathname.slice(1);
      admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
      await admin.connect();
    });
    afterEach(async () => {
      await admin.query(`alter database ${database} reset default_transaction_read_only`);
      await admin.end();
      await t.close();
      await testStore.cleanup();
      await receiver.close();
    });

    /** Makes the database refuse writes in new sessions, or take them again, and ends the app's sessions. */
    const readOnly = async (on: boolean, endSessions: boolean) => {
      await admin.query(
        on
          ? `alter database ${database} set default_transaction_read_only = on`
          : `alter database ${database} reset default_transaction_read_only`,
      );
      if (endSessions)
        await admin.query(
          'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
          [database],
        );
    };

    it('answers 503 while writes are refused, keeps an inbound event waiting, then stores and delivers it once', async () => {
      await readOnly(true, true);

      // The first statements after the sessions ended may meet the terminated connections: 503 too.
      const send = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'refused' });
      assert.deepEqual(
        { status: send.status, body: send.body, retryAfter: send.headers['retry-after'] },
        { status: 503, body: { error: { code: 503, message: STORE_UNAVAILABLE } }, retryAfter: '5' },
      );
      const again = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'refused' });
      assert.equal(again.status, 503, JSON.stringify(again.body));

      let inboundAnswer: ApiResponse | undefined;
      const inbound = t
        .call('POST', '/v1/sandbox/inbound', { phone: '5511988887777', body: 'arrived', pushName: 'Ana' })
        .then((answer) => {
          inboundAnswer = answer;
          return answer;
        });
      // Two refused writes more after it started, each try waiting longer (the longest an error of unknown kind got
      // was five tries within about 1.5 s): the event is still waiting for the store.
      const triesBefore = recordTries;
      await eventually(
        'two more refused writes or the request answered',
        () => recordTries - triesBefore >= 2 || inboundAnswer !== undefined,
        30_000,
      );
      assert.deepEqual(
        inboundAnswer && { status: inboundAnswer.status, body: inboundAnswer.body },
        undefined,
        'the inbound request is still waiting for the store',
      );
      assert.equal(t.services.sessions.backlog.count, 1);

      // The promoted server: new sessions write again; the pool's refused connections are not kept.
      await readOnly(false, false);
      const answered = await inbound;
      assert.equal(answered.status, 200, JSON.stringify(answered.body));
      const id: string = answered.body.data.id;
      assert.deepEqual(await messageIdsWith(t, 'arrived'), [id]);
      assert.deepEqual(await messageIdsWith(t, 'refused'), [], 'the sends that answered 503 were not kept');

      const bodies = () =>
        receiver.requests
          .map((request) => request.body.toString('utf8'))
          .filter((body) => body.includes('arrived'));
      await eventually('the event delivered', () => bodies().length >= 1);
      await allDelivered(t);
      assert.equal(bodies().length, 1);
      assert.equal(JSON.parse(bodies()[0] ?? '{}').event.info.id, id);

      const after = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'after' });
      assert.equal(after.status, 200, JSON.stringify(after.body));
    });
  });
}
