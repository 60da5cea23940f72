/**
 * A PostgreSQL server whose host goes silent (docs/decisions/0011-store-faults.md, A store that stops answering): a
 * failover to another host, a network cut. The connections open at that instant are neither answered nor closed, as a
 * TCP proxy in front of the server shows them (test/support/flight-proxy.ts `freeze`); connections made after reach
 * the server. Before, each statement sent on a silent connection waited until the kernel gave up (about 15 minutes on
 * Linux; never, behind the proxy), and the pool's connections ended up held by them: a send waited without an answer.
 * Now a connection silent for `answerTimeoutMs` while a statement waits is closed, and the send is answered, stored
 * once and delivered once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import type { DatabaseConfig } from '../../src/config/config.ts';
import { openStore } from '../../src/store/database.ts';
import { suspendAnswerWatch } from '../../src/store/pg-answers.ts';
import { type ApiResponse, createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { activityCount } from '../support/pg-activity.ts';
import { urlThrough } from '../support/probe-table.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { allDelivered, configureWebhook, messageIdsWith } from '../webhooks/support.ts';

/** How long a connection with a statement waiting may stay silent here, ms (the default is 30 s). */
const ANSWER_TIMEOUT_MS = 1_000;

/** `answer`, or undefined when it has not come within `ms` milliseconds. */
function within<T>(answer: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`a PostgreSQL server that goes silent (${dialect})`, () => {
    let base: TestStore;
    let proxy: FlightProxy;
    let receiver: Receiver;
    let t: TestApp;

    before(async () => {
      base = await createTestStore(dialect);
      receiver = await startReceiver();
      const url = new URL((base.database as { url: string }).url);
      proxy = await startFlightProxy({ host: url.hostname, port: Number(url.port || 5432) });
      const database: DatabaseConfig = {
        dialect: 'postgres',
        url: urlThrough(url, proxy),
        answerTimeoutMs: ANSWER_TIMEOUT_MS,
      };
      const store = await openStore(database, { schema: base.schema, poolSize: 5 });
      t = await createTestApp({
        testStore: { ...base, store, database },
        outboundCa: TEST_CA,
        webhookWorker: { pollIntervalMs: 25 },
        env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' },
      });
      await loginSandbox(t);
      await configureWebhook(t, receiver.url);
    });
    after(async () => {
      await t?.close();
      await t?.testStore.store.destroy();
      await base?.cleanup();
      await proxy?.close();
      await receiver?.close();
    });

    /** The webhook requests of own messages whose text is `body`. */
    const deliveriesOf = (body: string) =>
      receiver.requests.filter((request) => {
        const event = JSON.parse(request.body.toString()).event;
        return event?.info?.messageSource?.isFromMe === true && event?.message?.conversation === body;
      });

    it('closes the silent connections: a send is answered within seconds, stored once and delivered once', async () => {
      const first = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'before' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      await receiver.waitFor(() => deliveriesOf('before').length === 1, 10_000);

      // Every connection open now goes silent; the pool holds them idle, so the next statements go out on them.
      proxy.freeze();
      const send = () =>
        t.call(
          'POST',
          '/v1/messages/send',
          { phone: '5511988887777', body: 'during' },
          { 'idempotency-key': 'silent-server-1' },
        );
      // A send that found the store away answers 503 with Retry-After; its client tries again with the same key.
      let answer: ApiResponse | undefined = await within(send(), 20_000);
      for (let tries = 1; answer?.status === 503 && tries < 10; tries++)
        answer = await within(send(), 20_000);
      assert.ok(answer !== undefined, 'the send was answered');
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      const id: string = answer.body.data.id;

      // Read past the proxy: the store holds the message and its job once.
      const db = base.store.db;
      assert.deepEqual(await messageIdsWith(t, 'during', db), [id]);
      const jobs = await db.selectFrom('send_jobs').select(['id', 'status']).where('id', '=', id).execute();
      assert.deepEqual(jobs, [{ id, status: 'sent' }]);

      // Its webhook arrives once, and every delivery of the instance ends delivered.
      await receiver.waitFor(() => deliveriesOf('during').length === 1, 20_000);
      await allDelivered(t, db);
      assert.equal(deliveriesOf('during').length, 1, 'delivered once');
      assert.equal(deliveriesOf('before').length, 1, 'the earlier send was not delivered again');
    });
  });

  describe(`the answer watch's bound on a statement's silence (${dialect})`, () => {
    it('closes the connection of a statement silent past the bound, unless the watch is suspended (migrations)', async () => {
      const base = await createTestStore(dialect);
      const reports: string[] = [];
      const store = await openStore(
        { ...(base.database as { dialect: 'postgres'; url: string }), answerTimeoutMs: 200 },
        { schema: base.schema, poolSize: 1, onConnectionError: (error) => reports.push(error.message) },
      );
      try {
        // PostgreSQL sends nothing while it sleeps: the connection is silent for 0.5 s.
        await assert.rejects(sql`select pg_sleep(0.5)`.execute(store.db), (error: unknown) => {
          assert.match(String((error as { cause?: unknown }).cause ?? error), /connection terminated/i);
          return true;
        });
        // The pool replaced the closed connection.
        assert.deepEqual((await sql<{ one: number }>`select 1 as one`.execute(store.db)).rows, [{ one: 1 }]);
        // Reported once, by the watch: not again as the closed connection's own "connection terminated".
        assert.deepEqual(reports, [
          'PostgreSQL did not answer for 200 ms while 1 statement(s) waited: connection closed',
        ]);
        const resume = suspendAnswerWatch(store);
        try {
          await sql`select pg_sleep(0.5)`.execute(store.db);
        } finally {
          resume();
        }
        await assert.rejects(sql`select pg_sleep(0.5)`.execute(store.db));
      } finally {
        await store.destroy();
        await base.cleanup();
      }
    });

    it('cancels the statement of a connection it closes: one waiting on a lock neither lingers nor commits later', async () => {
      const base = await createTestStore(dialect);
      const store = await openStore(
        { ...(base.database as { dialect: 'postgres'; url: string }), answerTimeoutMs: 300 },
        { schema: base.schema, poolSize: 1 },
      );
      const admin = new pg.Client({ connectionString: (base.database as { url: string }).url });
      await admin.connect();
      try {
        await sql`create table silent_probe (id integer)`.execute(store.db);
        // Another session holds the table: the insert waits, silent, past the bound.
        await admin.query('begin');
        await admin.query(`lock table ${base.schema}.silent_probe in access exclusive mode`);
        await assert.rejects(sql`insert into silent_probe values (1)`.execute(store.db));
        const waiting = () => activityCount(admin, "query like 'insert into silent_probe%'");
        await eventually("the closed connection's backend is gone", async () => (await waiting()) === 0);
        await admin.query('commit');
        const rows = await admin.query(`select count(*)::int as n from ${base.schema}.silent_probe`);
        assert.equal(rows.rows[0].n, 0, 'the cancelled insert was not committed');
      } finally {
        await admin.end();
        await store.destroy();
        await base.cleanup();
      }
    });
  });
}
