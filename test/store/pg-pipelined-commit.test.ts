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
import { claimDeliveries } from '../../src/store/delivery-claims.ts';
import { isStoreUnavailableError } from '../../src/store/faults.ts';
import { commitsPipelined, runLast } from '../../src/store/last-statement.ts';
import { TransactionRolledBack } from '../../src/store/pg-pipelining.ts';
import { namedStatementPool } from '../../src/store/pg-statements.ts';
import { recorderTurns } from '../../src/store/recorder-turns.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { insertProbe, openProbeStore, probeIds, urlThrough } from '../support/probe-table.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';
import { configureWebhook, createWebhookApp, textMessage } from '../webhooks/support.ts';

/**
 * A transaction's last statement and its commit in one round trip on PostgreSQL
 * (docs/decisions/0063-pipelined-commit.md): counted as the client's round trips through a proxy, checked against
 * the rows the server kept, with the last statement failing, a failure the caller swallowed, the connection lost
 * while the last statement runs, SQLite (where the last statement is waited for), and a batch of the event
 * recorder, which costs two round trips.
 */

/** The statement inserting `id` (a value or anything `pg` is given to bind) into `probe`, compiled for `db`. */
function insertQuery(db: QueryExecutorProvider, id: unknown) {
  return sql`insert into probe (id) values (${id})`.compile(db);
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
    const proxiedUrl = (): string => urlThrough(url, proxy);

    /**
     * A store of one connection through the proxy, in `existing` (a test store, reached in its own database) or else
     * in a fresh schema holding an empty `probe`.
     */
    async function probeStore(existing?: TestStore): Promise<{ store: Store; schema: string }> {
      const opened =
        existing?.database.dialect === 'postgres' && existing.schema !== undefined
          ? await openProbeStore(urlThrough(new URL(existing.database.url), proxy), {
              schema: existing.schema,
            })
          : await openProbeStore(proxiedUrl());
      stores.push(opened.store);
      return opened;
    }

    /**
     * An instance with a webhook (its app closed, so its delivery worker claims nothing), and an event recorder with
     * the message and outbox projections on a store reached through the proxy; with `inTurns` its batches go through
     * the turn's transactions on PostgreSQL (`recorderTurns`), else each has a transaction of its own. Its first
     * record has warmed the connection and the routing.
     */
    async function proxiedRecorder(
      testStore: TestStore,
      inTurns = false,
    ): Promise<{ store: Store; recorder: EventRecorder; instanceId: string }> {
      const t = await createWebhookApp({ dialect: 'postgres', testStore });
      await configureWebhook(t, 'https://127.0.0.1:9/hook', null);
      const instanceId = t.instance.id;
      await t.close();
      const { store } = await probeStore(testStore);
      const recorder = new EventRecorder(
        store.db,
        [
          new MessageProjection(() => Date.now()),
          new OutboxProjection({ clock: () => Date.now(), maxAttempts: 3, onCommitted: () => undefined }),
        ],
        pino({ level: 'silent' }),
        inTurns ? { turn: recorderTurns(store.db) } : {},
      );
      await recorder.record(instanceId, textMessage('warms the connection'));
      return { store, recorder, instanceId };
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
      await store.db.transaction().execute((trx) => runLast(trx, insertQuery(trx, 1)));
      assert.equal(proxy.flights(), 1, 'begin with the insert, the commit behind them');
      proxy.reset();
      await store.db.transaction().execute(async (trx) => {
        await insertProbe(trx, 2);
        await runLast(trx, insertQuery(trx, 3));
      });
      assert.equal(proxy.flights(), 2);
      assert.deepEqual(await probeIds(admin, schema), [1, 2, 3]);
    });

    it('fails the commit with the last statement’s error, keeps nothing, and the connection serves the next', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 2);
          await runLast(trx, insertQuery(trx, 1));
        }),
        (error: unknown) => isDuplicate(error),
      );
      await store.db.transaction().execute((trx) => runLast(trx, insertQuery(trx, 3)));
      assert.deepEqual(await probeIds(admin, schema), [1, 3], 'the failed transaction kept nothing');
    });

    it('fails the commit with a failure the caller swallowed, rolls back, and keeps nothing', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 2);
          await insertProbe(trx, 1).catch(() => undefined);
        }),
        (error: unknown) => isDuplicate(error),
      );
      assert.deepEqual(await probeIds(admin, schema), [1], 'the transaction kept nothing');
    });

    it('commits what a rollback to a savepoint kept after a statement failed', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      await store.db.transaction().execute(async (trx) => {
        await insertProbe(trx, 2);
        await sql`savepoint before_duplicate`.execute(trx);
        await insertProbe(trx, 1).catch(() => undefined);
        await sql`rollback to savepoint before_duplicate`.execute(trx);
        await runLast(trx, insertQuery(trx, 3));
      });
      assert.deepEqual(await probeIds(admin, schema), [1, 2, 3]);
    });

    it('fails the commit when the last statement has a value pg cannot bind: the server never saw it', async () => {
      const { store, schema } = await probeStore();
      const unbindable = {
        toPostgres() {
          throw new Error('no way to write this value');
        },
      };
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 1);
          await runLast(trx, insertQuery(trx, unbindable));
        }),
        /no way to write this value/,
      );
      // pg closes a named statement whose values it could not bind: that connection is not kept, and naming goes on.
      await store.db.transaction().execute((trx) => runLast(trx, insertQuery(trx, 2)));
      assert.deepEqual(await probeIds(admin, schema), [2], 'the first insert was rolled back, not committed');
    });

    it('never runs a stale named last statement again after its commit', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      // Named once: the same text again is Bind and Execute only. The server forgets the name (as through a pooler).
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 2);
          await sql`deallocate all`.execute(trx);
          await runLast(trx, insertQuery(trx, 3));
        }),
        (error: unknown) => isStoreUnavailableError(error) || (error as { code?: string }).code === '26000',
      );
      await store.db.transaction().execute((trx) => runLast(trx, insertQuery(trx, 4)));
      assert.deepEqual(await probeIds(admin, schema), [1, 4], 'neither 2 nor 3 was kept');
    });

    it('fails the commit when the store hook fails the last statement (an injected fault)', async () => {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      let failInserts = false;
      const store = await openStore(
        { dialect: 'postgres', url: url.toString() },
        {
          schema,
          poolSize: 1,
          faults: (text) => {
            if (failInserts && text.includes('values ($1)')) throw new Error('injected: the store went away');
          },
        },
      );
      stores.push(store);
      await sql`create table probe (id integer primary key)`.execute(store.db);
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await sql`insert into probe (id) select 1`.execute(trx);
          failInserts = true;
          await runLast(trx, insertQuery(trx, 2));
        }),
        /the store went away/,
      );
      failInserts = false;
      assert.deepEqual(await probeIds(admin, schema), [], 'the transaction kept nothing');
    });

    it('fails as a store fault when the connection is lost under the last statement, then runs on a new one', async () => {
      const { store, schema } = await probeStore();
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(store.db);
      const pid = rows[0]?.pid;
      assert.ok(pid !== undefined);
      const committing = store.db.transaction().execute(async (trx) => {
        await insertProbe(trx, 1);
        await runLast(trx, sql`insert into probe (id) select 2 from pg_sleep(30)`.compile(trx));
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
      await store.db.transaction().execute((trx) => runLast(trx, insertQuery(trx, 3)));
      assert.deepEqual(await probeIds(admin, schema), [3]);
    });

    it("records a batch alone in the recorder's turn in two round trips, its commit behind its rows", async () => {
      const testStore = await createTestStore('postgres');
      try {
        const { store, recorder, instanceId } = await proxiedRecorder(testStore, true);
        const event = textMessage('alone in its turn');
        proxy.reset();
        await recorder.record(instanceId, event);
        assert.equal(
          proxy.flights(),
          2,
          'begin with the numbers, then the rows with the commit behind them (no round trip of its own for the commit)',
        );
        const stored = await sql<{ sequence: number; deliveries: number }>`
          select e.sequence::int as sequence, (select count(*)::int from webhook_deliveries d where d.event_id = e.id)
            as deliveries
          from webhook_events e join messages m on m.instance_id = e.instance_id
          where m.id = ${event.message.id} and e.sequence = (select max(sequence) from webhook_events)`.execute(
          store.db,
        );
        assert.deepEqual(
          stored.rows,
          [{ sequence: 2, deliveries: 1 }],
          'its event numbered after the first, one delivery',
        );
      } finally {
        await testStore.cleanup();
      }
    });

    it('records a recorder batch in two round trips and claims its deliveries in four', async () => {
      const testStore = await createTestStore('postgres');
      try {
        // Its delivery worker is stopped: the claims below are the only ones.
        const { store, recorder, instanceId } = await proxiedRecorder(testStore);
        const event = textMessage('through the proxy');
        proxy.reset();
        await recorder.record(instanceId, event);
        assert.equal(
          proxy.flights(),
          2,
          'begin with the sequence (the routing kept since the first record), then the rows with the commit',
        );
        const stored = await sql<{
          n: number;
        }>`select count(*)::int as n from messages where id = ${event.message.id}`.execute(store.db);
        assert.equal(stored.rows[0]?.n, 1);

        const now = Date.now();
        proxy.reset();
        const claimed = await claimDeliveries(store.db, 'postgres', {
          workerId: 'proxied',
          now,
          staleBefore: now - 60_000,
          limit: 8,
          perLane: 32,
        });
        assert.equal(
          proxy.flights(),
          4,
          'begin with the heads, the tails, the details with the open attempts, the insert with the commit',
        );
        assert.deepEqual(
          claimed.map((delivery) => [delivery.started, delivery.attemptNumber]),
          [
            [true, 1],
            [false, 1],
          ],
          'one lane batch of two: the head started, the tail numbered',
        );
        const attempts = await sql<{ event_id: string; number: number; worker: string }>`
          select event_id, number, worker from webhook_attempts`.execute(store.db);
        assert.deepEqual(
          attempts.rows.map((row) => [row.event_id, row.number, row.worker]),
          [[claimed[0]?.eventId, 1, 'proxied']],
          'the head attempt row was committed with the claim',
        );
      } finally {
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
        await store.db.transaction().execute((trx) => insertProbe(trx, 1));
        let thrownByRunLast = false;
        await assert.rejects(
          store.db.transaction().execute(async (trx) => {
            await insertProbe(trx, 2);
            await runLast(trx, insertQuery(trx, 1)).catch((error: unknown) => {
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

describe('a COMMIT answered with ROLLBACK (the statement adapter over a stand-in client)', () => {
  /**
   * A pool of one client that answers every statement as done and a `commit` with PostgreSQL's `ROLLBACK` tag, as
   * the server answers a commit of a transaction it aborted; nothing the adapter saw had failed.
   */
  function rollingBackPool(): pg.Pool {
    const answer = (text: string) => ({
      command: text === 'commit' ? 'ROLLBACK' : 'INSERT',
      rowCount: 0,
      rows: [],
    });
    const client = {
      query(config: string | { text: string }, callback?: (error: Error | null, result: unknown) => void) {
        const text = typeof config === 'string' ? config : config.text;
        if (callback !== undefined) {
          setImmediate(() => callback(null, answer(text)));
          return undefined;
        }
        return Promise.resolve(answer(text));
      },
      release: () => undefined,
    };
    return {
      options: { pipeline: true },
      connect: async () => client,
      end: async () => undefined,
    } as unknown as pg.Pool;
  }

  it('fails with TransactionRolledBack, whether or not a statement was still unanswered', async () => {
    const adapted = namedStatementPool(rollingBackPool());
    const session = await adapted.connect();
    await session.query('begin', []);
    await session.query('insert into probe (id) values ($1)', [1]);
    await assert.rejects(
      session.query('commit', []),
      (error: unknown) => error instanceof TransactionRolledBack,
    );
    await session.query('begin', []);
    const unanswered = session.query('insert into probe (id) values ($1)', [2]);
    await assert.rejects(
      session.query('commit', []),
      (error: unknown) => error instanceof TransactionRolledBack,
    );
    await unanswered;
    session.release();
  });
});
