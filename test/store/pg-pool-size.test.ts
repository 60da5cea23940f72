/**
 * The PostgreSQL pool's size (docs/decisions/0080-pool-size.md): `DATABASE_POOL_SIZE` bounds the server sessions a
 * process holds at once, and the service still sends, records and delivers with a pool of one connection.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { activityCount } from '../support/pg-activity.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { assertSigned, configureWebhook, createWebhookApp } from '../webhooks/support.ts';

/** The advisory lock the statements below wait on, held by the test's own session. */
const LOCK = 80_801;

/** A registered sandbox peer (docs/decisions/0004-sandbox.md: every number not ending in 0000). */
const PEER = '5511999990002';

if (testDialects().includes('postgres')) {
  describe('DATABASE_POOL_SIZE bounds the server sessions a process holds (postgres)', () => {
    let testStore: TestStore;
    let admin: pg.Client;
    before(async () => {
      testStore = await createTestStore('postgres');
      if (testStore.database.dialect !== 'postgres') throw new Error('a PostgreSQL test store was asked for');
      admin = new pg.Client({ connectionString: testStore.database.url });
      await admin.connect();
    });
    after(async () => {
      await admin.end();
      await testStore.cleanup();
    });

    /**
     * Opens a store configured by `DATABASE_POOL_SIZE=size` over the test database, runs three statements that each
     * wait on {@link LOCK} while the test holds it, and returns the backend ids they ran on: two waiting at once
     * hold two sessions, so the third shows whether the pool opened a third or waited for one of them.
     */
    async function backendsOfThree(size: string): Promise<number[]> {
      if (testStore.database.dialect !== 'postgres') throw new Error('a PostgreSQL test store was asked for');
      const { database } = loadConfig({ DATABASE_URL: testStore.database.url, DATABASE_POOL_SIZE: size });
      const store: Store = await openStore(database, { schema: testStore.schema });
      try {
        await admin.query('select pg_advisory_lock($1)', [LOCK]);
        const waiting = "wait_event_type = 'Lock' and datname = current_database()";
        let runs: Promise<number>[];
        try {
          runs = [1, 2, 3].map(async () => {
            const { rows } = await sql<{ pid: number }>`
              select pg_backend_pid() as pid from (select pg_advisory_xact_lock(${LOCK})) as locked
            `.execute(store.db);
            const [row] = rows;
            if (row === undefined) throw new Error('no row');
            return row.pid;
          });
          await eventually('two statements waiting on the lock', async () =>
            (await activityCount(admin, waiting)) >= 2 ? true : undefined,
          );
        } finally {
          await admin.query('select pg_advisory_unlock($1)', [LOCK]);
        }
        return await Promise.all(runs);
      } finally {
        await store.destroy();
      }
    }

    it('with 2, the third statement waits for one of the two sessions instead of opening its own', async () => {
      const pids = await backendsOfThree('2');
      assert.equal(pids.length, 3);
      assert.equal(new Set(pids).size, 2, `backends ${pids.join(', ')}`);
    });

    it('with 10 (the default), the third opens a session of its own', async () => {
      const pids = await backendsOfThree('10');
      assert.equal(new Set(pids).size, 3, `backends ${pids.join(', ')}`);
    });
  });

  describe('the service on a pool of one connection (postgres)', () => {
    let receiver: Receiver;
    let t: TestApp;
    beforeEach(async () => {
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect: 'postgres',
        testStore: await createTestStore('postgres', { poolSize: 1 }),
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
      });
      await loginSandbox(t);
      await configureWebhook(t, receiver.url);
    });
    afterEach(async () => {
      await t.close();
      await t.testStore.cleanup();
      await receiver.close();
    });

    it('answers concurrent sends, records them and delivers each one signed, in order', async () => {
      const seen = receiver.requests.length;
      const bodies = Array.from({ length: 12 }, (_, i) => `one connection ${i + 1}`);
      const answers = await Promise.all(
        bodies.map((body) =>
          t.call('POST', '/v1/messages/send', { phone: PEER, body }, { prefer: 'respond-async' }),
        ),
      );
      for (const answer of answers) assert.equal(answer.status, 202, JSON.stringify(answer.body));
      const ids = answers.map((answer) => answer.body.data.id as string);

      const sent = await eventually('every send recorded as sent', async () => {
        const rows = await t.testStore.store.db
          .selectFrom('send_jobs')
          .select(['id', 'status'])
          .where('instance_id', '=', t.instance.id)
          .where('id', 'in', ids)
          .execute();
        return rows.length === ids.length && rows.every((row) => row.status === 'sent') ? rows : undefined;
      });
      assert.equal(sent.length, 12);

      const requests = await eventually('a webhook for every sent message', () => {
        const texts = receiver.requests
          .slice(seen)
          .map((request) => JSON.parse(request.body.toString('utf8')))
          .filter((body) => body.type === 'Message' && body.event.info.messageSource.isFromMe === true);
        return texts.length >= 12 ? receiver.requests.slice(seen) : undefined;
      });
      for (const request of requests) assertSigned(request);
      const sequences = requests.map(
        (request) => JSON.parse(request.body.toString('utf8')).sequence as number,
      );
      assert.deepEqual(
        sequences,
        [...sequences].sort((a, b) => a - b),
        'one lane delivers in sequence order',
      );
      const delivered = requests
        .map((request) => JSON.parse(request.body.toString('utf8')))
        .filter((body) => body.type === 'Message')
        .map((body) => body.event.info.id as string);
      assert.deepEqual(new Set(delivered), new Set(ids));
    });
  });
}
