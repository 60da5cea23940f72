import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { CompiledQuery, type Kysely, sql } from 'kysely';
import pg from 'pg';
import { DomainError } from '../../src/domain/errors.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { isStoreUnavailableError } from '../../src/store/faults.ts';
import { KEY_LOOKUPS } from '../../src/store/pg-key-lookups.ts';
import { namedStatementPool, PLAN_EACH_RUN, statementName } from '../../src/store/pg-statements.ts';
import type { Database } from '../../src/store/schema.ts';
import { testDialects } from '../support/store.ts';

/**
 * Named prepared statements on PostgreSQL (docs/decisions/0055-named-statements.md), read back from the server's
 * own `pg_prepared_statements` view of the session: each text with parameters is parsed once per connection and
 * run by name; a statement a schema change made stale is run again (outside a transaction) or fails as a store
 * fault (inside one), and its connection is replaced either way.
 */

/** The prepared statements of the store's session (pool of one), with how often each ran. */
async function prepared(db: Kysely<Database>): Promise<{ name: string; statement: string; runs: number }[]> {
  const result = await sql<{ name: string; statement: string; runs: string }>`
    select name, statement, (generic_plans + custom_plans)::text as runs from pg_prepared_statements order by name
  `.execute(db);
  return result.rows.map((row) => ({ name: row.name, statement: row.statement, runs: Number(row.runs) }));
}

/** The server process of the store's session (pool of one). */
async function backendPid(db: Kysely<Database>): Promise<number> {
  const result = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  const pid = result.rows[0]?.pid;
  assert.ok(pid !== undefined);
  return pid;
}

/** The row of `probe` with id `id`, every column (`select *`, the shape a schema change makes stale). */
function probe(db: Kysely<Database>, id: number) {
  return sql<Record<string, unknown>>`select * from probe where id = ${id}`.execute(db);
}

/** What reading `probe` row 1 in a transaction of its own threw (undefined when it did not). */
function probeInTransaction(db: Kysely<Database>): Promise<unknown> {
  return db
    .transaction()
    .execute((trx) => probe(trx, 1))
    .then(
      () => undefined,
      (error: unknown) => error,
    );
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`named prepared statements (${dialect})`, () => {
    const url = process.env.TEST_DATABASE_URL ?? '';
    const stores: Store[] = [];
    const admin = new pg.Client({ connectionString: url });
    let connected = false;

    after(async () => {
      for (const store of stores) await store.destroy();
      if (connected) await admin.end();
    });

    /**
     * A store of one connection in a fresh schema holding `probe (id, note)` with one row; `switches` collects what
     * `onSessionSwitch` was told.
     */
    async function probeStore(
      preparedStatements = true,
    ): Promise<{ store: Store; schema: string; switches: Error[] }> {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      const switches: Error[] = [];
      const store = await openStore(
        { dialect: 'postgres', url, preparedStatements },
        { schema, poolSize: 1, onSessionSwitch: (error) => switches.push(error) },
      );
      stores.push(store);
      await sql`create table probe (id integer primary key, note text not null)`.execute(store.db);
      await sql`insert into probe (id, note) values (1, 'one')`.execute(store.db);
      return { store, schema, switches };
    }

    /** Adds a column to `schema.probe` from another session, as a newer node's migration would. */
    async function addColumn(schema: string): Promise<void> {
      if (!connected) {
        await admin.connect();
        connected = true;
      }
      await admin.query(`alter table ${schema}.probe add column extra text`);
    }

    it('parses a statement with parameters once per connection and runs it by name', async () => {
      const { store, schema } = await probeStore();
      for (let run = 0; run < 3; run++) {
        assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      }
      const [statement, ...others] = await prepared(store.db);
      assert.deepEqual(others, []);
      assert.ok(statement);
      assert.equal(statement.name, statementName('select * from probe where id = $1', schema));
      assert.equal(statement.statement, 'select * from probe where id = $1');
      assert.equal(statement.runs, 3);
    });

    it('runs a text that starts with the plan-each-run comment unnamed, planned at each run', async () => {
      const { store } = await probeStore();
      const text = `${PLAN_EACH_RUN} select * from probe where id = $1`;
      for (let run = 0; run < 3; run++) {
        const result = await store.db.executeQuery(CompiledQuery.raw(text, [1]));
        assert.deepEqual(result.rows, [{ id: 1, note: 'one' }]);
      }
      assert.deepEqual(await prepared(store.db), []);
    });

    /** The planner settings a key-lookup statement changes, as the session has them now. */
    const SETTINGS = `current_setting('plan_cache_mode') as mode, current_setting('enable_seqscan') as seqscan,
      current_setting('enable_hashjoin') as hashjoin, current_setting('enable_mergejoin') as mergejoin`;
    const KEY_LOOKUP_VALUES = {
      mode: 'force_generic_plan',
      seqscan: 'off',
      hashjoin: 'off',
      mergejoin: 'off',
    };
    const SESSION_VALUES = { mode: 'auto', seqscan: 'on', hashjoin: 'on', mergejoin: 'on' };

    it('runs a key-lookup text named, on its generic plan under the key-lookup settings, and leaves the session its own', async () => {
      const { store } = await probeStore();
      const text = `${KEY_LOOKUPS} select ${SETTINGS}, note from probe where id = $1`;
      for (let run = 0; run < 2; run++) {
        const result = await store.db.executeQuery(CompiledQuery.raw(text, [1]));
        assert.deepEqual(result.rows, [{ ...KEY_LOOKUP_VALUES, note: 'one' }]);
        assert.deepEqual((await sql.raw(`select ${SETTINGS}`).execute(store.db)).rows, [SESSION_VALUES]);
      }
      assert.deepEqual(
        (await prepared(store.db)).map((s) => [s.statement, s.runs]),
        [[text, 2]],
      );
      const plans = await sql<{ generic: string; custom: string }>`
        select generic_plans::text as generic, custom_plans::text as custom from pg_prepared_statements
      `.execute(store.db);
      assert.deepEqual(
        plans.rows,
        [{ generic: '2', custom: '0' }],
        'the plan made once is kept from the first run',
      );
    });

    it('commits what a key-lookup statement wrote outside a transaction, and keeps nothing when it fails', async () => {
      const { store, schema } = await probeStore();
      const insert = `${KEY_LOOKUPS} insert into probe (id, note) values ($1, $2)`;
      await store.db.executeQuery(CompiledQuery.raw(insert, [2, 'two']));
      if (!connected) {
        await admin.connect();
        connected = true;
      }
      const seen = await admin.query(`select id, note from ${schema}.probe order by id`);
      assert.deepEqual(seen.rows, [
        { id: 1, note: 'one' },
        { id: 2, note: 'two' },
      ]);
      const twice = `${KEY_LOOKUPS} insert into probe (id, note) values ($1, 'three'), ($1, 'again')`;
      await assert.rejects(store.db.executeQuery(CompiledQuery.raw(twice, [3])), { code: '23505' });
      const after = await admin.query(`select id from ${schema}.probe order by id`);
      assert.deepEqual(after.rows, [{ id: 1 }, { id: 2 }], 'nothing of the failed statement kept');
      assert.deepEqual((await sql.raw(`select ${SETTINGS}`).execute(store.db)).rows, [SESSION_VALUES]);
      assert.deepEqual(
        (await probe(store.db, 2)).rows,
        [{ id: 2, note: 'two' }],
        'the connection still serves',
      );
    });

    it("inside a transaction, gives the statements after a key-lookup one the session's settings", async () => {
      const { store } = await probeStore();
      const text = `${KEY_LOOKUPS} select ${SETTINGS} from probe where id = $1`;
      const [during, later] = await store.db.transaction().execute(async (trx) => {
        const inside = await trx.executeQuery(CompiledQuery.raw(text, [1]));
        await sql`update probe set note = ${'changed'} where id = 1`.execute(trx);
        const next = await sql.raw(`select ${SETTINGS}`).execute(trx);
        return [inside.rows, next.rows];
      });
      assert.deepEqual(during, [KEY_LOOKUP_VALUES]);
      assert.deepEqual(later, [SESSION_VALUES]);
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'changed' }]);
    });

    it('prepares nothing with DATABASE_PREPARED_STATEMENTS=off', async () => {
      const { store } = await probeStore(false);
      for (let run = 0; run < 3; run++) {
        assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      }
      assert.deepEqual(await prepared(store.db), []);
    });

    it('outside a transaction, runs a statement a schema change made stale again and replaces the connection', async () => {
      const { store, schema } = await probeStore();
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      const before = await backendPid(store.db);
      await addColumn(schema);
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one', extra: null }]);
      const replaced = await backendPid(store.db);
      assert.notEqual(replaced, before, 'the stale connection was closed');
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one', extra: null }]);
      assert.deepEqual(
        (await prepared(store.db)).map((s) => [s.statement, s.runs]),
        [['select * from probe where id = $1', 1]],
        'prepared afresh on the new connection',
      );
    });

    it('inside a transaction, fails as a store fault, and the next transaction runs on a new connection', async () => {
      const { store, schema } = await probeStore();
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      const before = await backendPid(store.db);
      await addColumn(schema);
      const failed = await probeInTransaction(store.db);
      assert.ok(failed instanceof DomainError, `a store fault, not ${String(failed)}`);
      assert.equal(failed.code, 'store_unavailable');
      assert.match(String(failed.cause), /cached plan must not change result type/);
      assert.ok(isStoreUnavailableError(failed.cause));
      const rows = await store.db.transaction().execute(async (trx) => (await probe(trx, 1)).rows);
      assert.deepEqual(rows, [{ id: 1, note: 'one', extra: null }]);
      assert.notEqual(await backendPid(store.db), before);
    });

    it('a write in a transaction begun read only fails as the bug it is, not a store fault, and keeps its connection', async () => {
      const { store } = await probeStore();
      const before = await backendPid(store.db);
      const failed = await store.db
        .transaction()
        .setAccessMode('read only')
        .execute((trx) => sql`insert into probe (id, note) values (2, 'two')`.execute(trx))
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.equal(
        (failed as { code?: unknown } | undefined)?.code,
        '25006',
        `refused as read only: ${String(failed)}`,
      );
      assert.ok(!(failed instanceof DomainError), 'not wrapped as a store fault');
      assert.equal(isStoreUnavailableError(failed), false);
      assert.equal(await backendPid(store.db), before, 'the connection is kept');
      assert.deepEqual((await probe(store.db, 2)).rows, []);
    });

    it('a write a read-only session refuses (a standby) is a store fault, and its connection is replaced', async () => {
      const { store } = await probeStore();
      await sql`set default_transaction_read_only = on`.execute(store.db);
      const before = await backendPid(store.db);
      const failed = await store.db
        .transaction()
        .execute((trx) => sql`insert into probe (id, note) values (2, 'two')`.execute(trx))
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.ok(failed instanceof DomainError, `a store fault, not ${String(failed)}`);
      assert.equal(failed.code, 'store_unavailable');
      assert.notEqual(await backendPid(store.db), before, 'the refused connection was closed');
      await sql`insert into probe (id, note) values (2, 'two')`.execute(store.db);
      assert.deepEqual((await probe(store.db, 2)).rows, [{ id: 2, note: 'two' }]);
    });

    it('names a statement by a digest of its text and schema: one name, one text, in every process', () => {
      const text = 'select * from probe where id = $1';
      assert.match(statementName(text, 's1'), /^parley_[0-9a-f]{32}$/);
      assert.equal(statementName(text, 's1'), statementName(text, 's1'));
      assert.notEqual(statementName(text, 's1'), statementName(text, 's2'));
      assert.notEqual(statementName(text, 's1'), statementName(`${text} `, 's1'));
      assert.equal(statementName(text), statementName(text, ''));
    });

    it("a name the session already holds (a pooler's shared session) turns names off; the statement is answered", async () => {
      const { store, schema, switches } = await probeStore();
      const name = statementName('select * from probe where id = $1', schema);
      // Another client's statement of the same name in this server session, as behind a pooler in transaction mode.
      await sql.raw(`prepare ${name} (integer) as select id from probe where id = $1`).execute(store.db);
      const pid = await backendPid(store.db);
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      assert.equal(switches.length, 1, 'told once');
      assert.equal((switches[0] as Error & { code?: string }).code, '42P05');
      assert.equal(await backendPid(store.db), pid, 'the connection is kept');
      assert.deepEqual(
        (await prepared(store.db)).map((s) => [s.name, s.statement, s.runs]),
        [[name, `prepare ${name} (integer) as select id from probe where id = $1`, 0]],
        'nothing more prepared, and the other statement never run',
      );
    });

    it('a statement gone from the session fails its transaction as a store fault once; then statements run unnamed', async () => {
      const { store, switches } = await probeStore();
      assert.deepEqual((await probe(store.db, 1)).rows, [{ id: 1, note: 'one' }]);
      // The session loses its statements, as when a pooler hands the connection another server session.
      await sql`deallocate all`.execute(store.db);
      const failed = await probeInTransaction(store.db);
      assert.ok(failed instanceof DomainError, `a store fault, not ${String(failed)}`);
      assert.equal(failed.code, 'store_unavailable');
      assert.equal((failed.cause as { code?: string }).code, '26000');
      assert.equal(switches.length, 1);
      for (let run = 0; run < 3; run++) {
        const rows = await store.db.transaction().execute(async (trx) => (await probe(trx, 1)).rows);
        assert.deepEqual(rows, [{ id: 1, note: 'one' }]);
      }
      assert.deepEqual(await prepared(store.db), [], 'nothing prepared again');
      assert.equal(switches.length, 1, 'told once');
    });

    it('names at most `limit` texts; the others run unnamed', async () => {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      const pool = new pg.Pool({ connectionString: url, max: 1, options: `-c search_path=${schema}` });
      const named = namedStatementPool(pool, { limit: 1 });
      try {
        const client = await named.connect();
        try {
          await client.query(`create schema ${schema}`, []);
          await client.query('select $1::int as a', [1]);
          await client.query('select $1::int as b', [2]);
          await client.query('select $1::int as a', [3]);
          const result = await client.query<{ statement: string }>(
            'select statement from pg_prepared_statements order by name',
            [],
          );
          assert.deepEqual(result.rows, [{ statement: 'select $1::int as a' }]);
        } finally {
          client.release();
        }
      } finally {
        await named.end();
      }
    });
  });
}
