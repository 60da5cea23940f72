import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type QueryExecutorProvider, sql } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { OutboxProjection } from '../../src/events/outbox-projection.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { isStoreUnavailableError } from '../../src/store/faults.ts';
import { commitsPipelined, runLast } from '../../src/store/last-statement.ts';
import { TransactionRolledBack } from '../../src/store/pg-statements.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * A transaction's last statement and its commit in one round trip on PostgreSQL
 * (docs/decisions/0063-pipelined-commit.md): counted as the client's round trips through a proxy, checked against
 * the rows the server kept, with the last statement failing, a failure the caller swallowed, the connection lost
 * while the last statement runs, SQLite (where the last statement is waited for), and a batch of the event
 * recorder, which costs two round trips.
 */

/** `probe (id integer primary key)` in `schema`, read from a connection of its own. */
async function probeIds(admin: pg.Client, schema: string): Promise<number[]> {
  const result = await admin.query<{ id: number }>(`select id from ${schema}.probe order by id`);
  return result.rows.map((row) => row.id);
}

/** Inserts `id` into `probe`. */
function insert(db: QueryExecutorProvider, id: number) {
  return sql`insert into probe (id) values (${id})`.execute(db);
}

/** True for PostgreSQL's unique violation (SQLSTATE 23505) or SQLite's unique constraint error. */
function isDuplicate(error: unknown): boolean {
  const { code } = error as { code?: unknown };
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`pipelined commit (${dialect})`, () => {
    const url = new URL(process.env.TEST_DATABASE_URL ?? '');
    const admin = new pg.Client({ connectionString: url.toString() });
    const stores: Store[] = [];
    let proxy: FlightProxy;

    before(async () => {
      await admin.connect();
      proxy = await startFlightProxy({ host: url.hostname, port: Number(url.port || 5432) });
    });

    after(async () => {
      for (const store of stores) await store.destroy();
      await proxy.close();
      await admin.end();
    });

    /** The store's URL through the proxy. */
    function proxiedUrl(): string {
      const through = new URL(url.toString());
      through.hostname = '127.0.0.1';
      through.port = String(proxy.port);
      return through.toString();
    }

    /** A store of one connection through the proxy, in `schema` (default: a fresh one holding an empty `probe`). */
    async function probeStore(existing?: string): Promise<{ store: Store; schema: string }> {
      const schema = existing ?? `t_${randomBytes(6).toString('hex')}`;
      const store = await openStore({ dialect: 'postgres', url: proxiedUrl() }, { schema, poolSize: 1 });
      stores.push(store);
      if (existing === undefined) await sql`create table probe (id integer primary key)`.execute(store.db);
      return { store, schema };
    }

    it('is marked on the store and its transactions', async () => {
      const { store } = await probeStore();
      assert.equal(commitsPipelined(store.db), true);
      await store.db.transaction().execute(async (trx) => {
        assert.equal(commitsPipelined(trx), true);
      });
    });

    it('sends the commit behind the last statement: one round trip for begin, insert and commit', async () => {
      const { store, schema } = await probeStore();
      proxy.reset();
      await store.db.transaction().execute((trx) => runLast(trx, () => insert(trx, 1)));
      assert.equal(proxy.flights(), 1, 'begin with the insert, the commit behind them');
      proxy.reset();
      await store.db.transaction().execute(async (trx) => {
        await insert(trx, 2);
        await runLast(trx, () => insert(trx, 3));
      });
      assert.equal(proxy.flights(), 2);
      assert.deepEqual(await probeIds(admin, schema), [1, 2, 3]);
    });

    it('fails the commit with the last statement’s error, keeps nothing, and the connection serves the next', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insert(trx, 1));
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insert(trx, 2);
          await runLast(trx, () => insert(trx, 1));
        }),
        (error: unknown) => isDuplicate(error),
      );
      await store.db.transaction().execute((trx) => runLast(trx, () => insert(trx, 3)));
      assert.deepEqual(await probeIds(admin, schema), [1, 3], 'the failed transaction kept nothing');
    });

    it('fails a commit PostgreSQL answered with ROLLBACK after a failure the caller swallowed', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insert(trx, 1));
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insert(trx, 2);
          await insert(trx, 1).catch(() => undefined);
        }),
        (error: unknown) => error instanceof TransactionRolledBack,
      );
      assert.deepEqual(await probeIds(admin, schema), [1], 'the transaction kept nothing');
    });

    it('fails as a store fault when the connection is lost under the last statement, then runs on a new one', async () => {
      const { store, schema } = await probeStore();
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(store.db);
      const pid = rows[0]?.pid;
      assert.ok(pid !== undefined);
      const committing = store.db.transaction().execute(async (trx) => {
        await insert(trx, 1);
        await runLast(trx, () => sql`insert into probe (id) select 2 from pg_sleep(30)`.execute(trx));
      });
      await eventually('the last statement to be running', async () => {
        const found = await admin.query(
          "select 1 from pg_stat_activity where pid = $1 and query like '%pg_sleep%'",
          [pid],
        );
        return found.rowCount === 1;
      });
      await admin.query('select pg_terminate_backend($1)', [pid]);
      await assert.rejects(committing, (error: unknown) => isStoreUnavailableError(error));
      await store.db.transaction().execute((trx) => runLast(trx, () => insert(trx, 3)));
      assert.deepEqual(await probeIds(admin, schema), [3]);
    });

    it('records a batch of the event recorder in two round trips: the routing, then its rows with the commit', async () => {
      const testStore = await createTestStore('postgres');
      const t = await createWebhookApp({ dialect: 'postgres', testStore });
      try {
        await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
        const { store } = await probeStore(testStore.schema);
        const recorder = new EventRecorder(
          store.db,
          [
            new MessageProjection(() => Date.now()),
            new OutboxProjection({ clock: () => Date.now(), maxAttempts: 3, onCommitted: () => undefined }),
          ],
          pino({ level: 'silent' }),
        );
        const event = textMessage('through the proxy');
        await recorder.record(t.instance.id, textMessage('warms the connection'));
        proxy.reset();
        await recorder.record(t.instance.id, event);
        assert.equal(
          proxy.flights(),
          2,
          'begin with the routing and sequence, then the rows with the commit',
        );
        const { rows } = await sql<{
          n: number;
        }>`select count(*)::int as n from messages where id = ${event.message.id}`.execute(store.db);
        assert.equal(rows[0]?.n, 1);
        const deliveries = await sql<{ n: number }>`
          select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id
          where e.instance_id = ${t.instance.id}`.execute(store.db);
        assert.equal(deliveries.rows[0]?.n, 2, 'a delivery for each recorded message');
      } finally {
        await t.close();
        await testStore.cleanup();
      }
    });
  });
}

for (const dialect of testDialects().filter((d) => d === 'sqlite')) {
  describe(`a last statement on SQLite (${dialect})`, () => {
    it('is waited for: its failure is runLast’s own, and the transaction keeps nothing', async () => {
      const testStore = await createTestStore('sqlite');
      try {
        const { store } = testStore;
        assert.equal(commitsPipelined(store.db), false);
        await sql`create table probe (id integer primary key)`.execute(store.db);
        await store.db.transaction().execute((trx) => insert(trx, 1));
        let thrownByRunLast = false;
        await assert.rejects(
          store.db.transaction().execute(async (trx) => {
            await insert(trx, 2);
            await runLast(trx, () => insert(trx, 1)).catch((error: unknown) => {
              thrownByRunLast = true;
              throw error;
            });
          }),
          (error: unknown) => isDuplicate(error),
        );
        assert.equal(thrownByRunLast, true);
        const { rows } = await sql<{ id: number }>`select id from probe order by id`.execute(store.db);
        assert.deepEqual(
          rows.map((row) => row.id),
          [1],
        );
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
