import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, type PostgresPool, sql } from 'kysely';
import pg from 'pg';
import type { Store } from '../../src/store/database.ts';
import { isStoreUnavailableError } from '../../src/store/faults.ts';
import { namedStatementPool } from '../../src/store/pg-statements.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { insertProbe, openProbeStore, probeIds, urlThrough } from '../support/probe-table.ts';
import { testDialects } from '../support/store.ts';

/**
 * A transaction's `begin` leaves with its first statement on PostgreSQL (docs/decisions/0062-pipelined-begin.md):
 * counted as the client's round trips through a proxy, checked against the rows the server kept, with the first
 * statement failing, the connection lost before it, a BEGIN the server refuses, and a transaction that runs no
 * statement.
 */

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`pipelined begin (${dialect})`, () => {
    const url = new URL(process.env.TEST_DATABASE_URL ?? '');
    const admin = new pg.Client({ connectionString: url.toString() });
    const stores: Store[] = [];
    const pools: pg.Pool[] = [];
    let proxy: FlightProxy;

    before(async () => {
      await admin.connect();
      proxy = await startFlightProxy({ host: url.hostname, port: Number(url.port || 5432) });
    });

    after(async () => {
      for (const store of stores) await store.destroy();
      for (const pool of pools) await pool.end();
      await proxy.close();
      await admin.end();
    });

    /** The store's URL through the proxy. */
    const proxiedUrl = (): string => urlThrough(url, proxy);

    /** A store of one connection, through the proxy, in a fresh schema holding an empty `probe`; connected. */
    async function probeStore(preparedStatements = true): Promise<{ store: Store; schema: string }> {
      const opened = await openProbeStore(proxiedUrl(), { preparedStatements });
      stores.push(opened.store);
      return opened;
    }

    /**
     * The statement adapter over a `pg` pool of one connection of its own (`pipeline` as given, through the proxy
     * when `proxied`), in a fresh schema holding an empty `probe`.
     */
    async function adaptedPool(
      pipeline: boolean,
      proxied: boolean,
    ): Promise<{ adapted: PostgresPool; schema: string }> {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      await admin.query(`create schema ${schema}`);
      await admin.query(`create table ${schema}.probe (id integer primary key)`);
      const pool = new pg.Pool({
        connectionString: proxied ? proxiedUrl() : url.toString(),
        max: 1,
        pipeline,
        options: `-c search_path=${schema}`,
      });
      pools.push(pool);
      return { adapted: namedStatementPool(pool, { schema }), schema };
    }

    it('sends the begin with the first statement: two round trips for a transaction of one', async () => {
      const { store, schema } = await probeStore();
      proxy.reset();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      assert.equal(proxy.flights(), 2, 'begin with the insert, then commit');
      proxy.reset();
      await store.db.transaction().execute(async (trx) => {
        await insertProbe(trx, 2);
        await insertProbe(trx, 3);
      });
      assert.equal(proxy.flights(), 3);
      assert.deepEqual(await probeIds(admin, schema), [1, 2, 3]);
    });

    it('pipelines the begin with DATABASE_PREPARED_STATEMENTS=off too', async () => {
      const { store, schema } = await probeStore(false);
      proxy.reset();
      await store.db.transaction().execute((trx) => insertProbe(trx, 7));
      assert.equal(proxy.flights(), 2);
      assert.deepEqual(await probeIds(admin, schema), [7]);
    });

    it('takes three round trips for the same transaction on a pool that does not pipeline', async () => {
      const { adapted, schema } = await adaptedPool(false, true);
      const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: adapted }) });
      await sql`select 1`.execute(db);
      proxy.reset();
      await db.transaction().execute((trx) => insertProbe(trx, 1));
      assert.equal(proxy.flights(), 3, 'begin, insert, commit');
      assert.deepEqual(await probeIds(admin, schema), [1]);
    });

    it('never reaches the server for a transaction that runs no statement', async () => {
      const { store } = await probeStore();
      proxy.reset();
      assert.equal(await store.db.transaction().execute(async () => 'nothing'), 'nothing');
      await assert.rejects(
        store.db.transaction().execute(async () => {
          throw new Error('changed its mind');
        }),
        /changed its mind/,
      );
      assert.equal(proxy.flights(), 0);
    });

    it('fails the transaction on its first statement, keeps nothing, and the connection serves the next', async () => {
      const { store, schema } = await probeStore();
      await store.db.transaction().execute((trx) => insertProbe(trx, 1));
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 1);
        }),
        (error: unknown) => (error as { code?: string }).code === '23505',
      );
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertProbe(trx, 2);
          await insertProbe(trx, 1);
        }),
        (error: unknown) => (error as { code?: string }).code === '23505',
      );
      await store.db.transaction().execute((trx) => insertProbe(trx, 3));
      assert.deepEqual(await probeIds(admin, schema), [1, 3], 'the failed transactions kept nothing');
    });

    it('fails as a store fault when the connection is lost before the first statement, then runs on a new one', async () => {
      const { store, schema } = await probeStore();
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(store.db);
      const pid = rows[0]?.pid;
      assert.ok(pid !== undefined);
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          // The begin is not sent yet: the server session goes away while the transaction is "open".
          await admin.query('select pg_terminate_backend($1)', [pid]);
          await eventually('the backend to be gone', async () => {
            const { rowCount } = await admin.query('select 1 from pg_stat_activity where pid = $1', [pid]);
            return rowCount === 0;
          });
          await insertProbe(trx, 1);
        }),
        (error: unknown) => isStoreUnavailableError(error),
      );
      await store.db.transaction().execute((trx) => insertProbe(trx, 2));
      assert.deepEqual(await probeIds(admin, schema), [2]);
    });

    it('fails with the error of a begin the server refused, and closes the connection the statement ran on', async () => {
      const { adapted, schema } = await adaptedPool(true, false);
      const pidOf = async (client: Awaited<ReturnType<typeof adapted.connect>>) =>
        (await client.query<{ pid: number }>('select pg_backend_pid() as pid', [])).rows[0]?.pid;
      const first = await adapted.connect();
      const before = await pidOf(first);
      // Kysely never writes a wrong BEGIN; this one stands for a server that refuses BEGIN alone.
      await first.query('start transaction isolation level nonsense', []);
      await assert.rejects(first.query('insert into probe (id) values ($1)', [9]), /nonsense/);
      await first.query('rollback', []);
      first.release();
      // Each query of a pipeline has its own Sync: the insert ran on its own. Its session is not kept.
      assert.deepEqual(await probeIds(admin, schema), [9]);
      const second = await adapted.connect();
      assert.notEqual(await pidOf(second), before, 'a new connection');
      second.release();
    });

    it('drops a begin still pending when its connection goes back to the pool', async () => {
      const { adapted, schema } = await adaptedPool(true, false);
      const first = await adapted.connect();
      assert.equal((await first.query('begin', [])).command, 'BEGIN');
      first.release();
      const second = await adapted.connect();
      await second.query('insert into probe (id) values ($1)', [5]);
      second.release();
      assert.deepEqual(await probeIds(admin, schema), [5], 'the insert ran on its own, committed');
    });
  });
}
