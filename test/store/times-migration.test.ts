/**
 * Migration 0015 (docs/decisions/0027-times-as-epoch-ms.md): a store written by migrations 0001–0014, with RFC 3339
 * times (milliseconds, NULLs) in every time column, is migrated to the latest schema; each value becomes exactly its
 * epoch ms, NULLs stay NULL, indexes and foreign keys survive, and `down` gives the original text back. Runs on SQLite
 * and, when TEST_DATABASE_URL is set, PostgreSQL.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Kysely, Migrator, sql } from 'kysely';
import { migrateToLatest, openStore, type Store } from '../../src/store/database.ts';
import { TIME_COLUMNS } from '../../src/store/migrations/0015_times_as_epoch_ms.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { type TestDialect, testDialects } from '../support/store.ts';

const T1 = '2026-01-15T12:02:00.123Z';
const T2 = '2026-01-15T12:02:00.999Z';
const T3 = '1999-12-31T23:59:59.001Z';
const T4 = '2038-01-19T03:14:08.000Z';

/** Rows of every table with a time column, as written before migration 0015 (times as RFC 3339 text). */
const ROWS: Record<string, Record<string, unknown>[]> = {
  organizations: [{ id: 'org', name: 'acme', plan: 'free', created_at: T1 }],
  instances: [
    { id: 'i1', org_id: 'org', env: 'test', name: 'one', last_connected_at: T2, created_at: T3 },
    { id: 'i2', org_id: 'org', env: 'live', name: 'two', last_connected_at: null, created_at: T4 },
  ],
  api_keys: [
    {
      id: 'k1',
      org_id: 'org',
      env: 'test',
      name: 'k',
      prefix: 'pk_test_',
      key_hash: 'h1',
      scopes: '[]',
      instance_ids: '[]',
      expires_at: T4,
      revoked_at: T2,
      last_used_at: T3,
      created_at: T1,
    },
    {
      id: 'k2',
      org_id: 'org',
      env: 'test',
      name: 'k',
      prefix: 'pk_test_',
      key_hash: 'h2',
      scopes: '[]',
      instance_ids: '[]',
      expires_at: null,
      revoked_at: null,
      last_used_at: null,
      created_at: T2,
    },
  ],
  engine_auth: [{ instance_id: 'i1', category: 'creds', key_id: 'x', value: 'v', updated_at: T1 }],
  instance_locks: [{ instance_id: 'i1', owner: 'node', acquired_at: T1, expires_at: T2 }],
  webhook_state: [
    { instance_id: 'i1', last_sequence: 1, disabled_at: T3, disabled_reason: 'gone' },
    { instance_id: 'i2', last_sequence: 0, disabled_at: null, disabled_reason: null },
  ],
  webhook_events: [
    { id: 'e1', instance_id: 'i1', sequence: 1, type: 'Message', payload: '{}', created_at: T1 },
  ],
  webhook_deliveries: [
    {
      event_id: 'e1',
      instance_id: 'i1',
      sequence: 1,
      status: 'delivered',
      max_attempts: 5,
      run_at: 1,
      delivered_at: T2,
      created_at: T1,
      updated_at: T2,
    },
  ],
  webhook_attempts: [
    { id: 'a1', event_id: 'e1', number: 1, url: 'https://x', worker: 'w', attempted_at: T1, finished_at: T2 },
    {
      id: 'a2',
      event_id: 'e1',
      number: 2,
      url: 'https://x',
      worker: 'w',
      attempted_at: T2,
      finished_at: null,
    },
  ],
  gateway_replay: [{ instance_id: 'i1', signature: 'ab', expires_at: T4 }],
  messages: [
    {
      instance_id: 'i1',
      id: 'm1',
      chat: 'c@s.whatsapp.net',
      sender: 's',
      from_me: 0,
      is_group: 0,
      type: 'text',
      content: '{}',
      push_name: '',
      timestamp: T3,
      state: 'read',
      state_at: T2,
      created_at: T1,
    },
  ],
  chat_peers: [{ instance_id: 'i1', jid: 'c@s.whatsapp.net', push_name: '', first_at: T3, last_at: T2 }],
  nodes: [{ id: 'n1', host: 'h', pid: 1, started_at: T1, heartbeat_at: 5 }],
  dashboard_users: [
    {
      id: 'u1',
      org_id: 'org',
      email: 'a@example.com',
      password_hash: 'x',
      role: 'owner',
      created_at: T1,
      last_sign_in_at: null,
    },
    {
      id: 'u2',
      org_id: 'org',
      email: 'b@example.com',
      password_hash: 'x',
      role: 'viewer',
      created_at: T3,
      last_sign_in_at: T4,
    },
  ],
  dashboard_sessions: [{ id_hash: 'sh', user_id: 'u1', csrf_token: 't', created_at: T2, expires_at: 7 }],
  call_settings: [{ instance_id: 'i1', reject: 1, message: null, updated_at: T4 }],
  idempotency_keys: [
    {
      org_id: 'org',
      env: 'test',
      key: 'key',
      fingerprint: 'f',
      token: 't',
      locked_until: 1,
      created_at: T3,
      expires_at: 2,
    },
  ],
};

/** Primary-key columns to order rows by, per table. */
const ORDER: Record<string, string[]> = {
  engine_auth: ['instance_id'],
  instance_locks: ['instance_id'],
  webhook_state: ['instance_id'],
  webhook_deliveries: ['event_id'],
  gateway_replay: ['instance_id'],
  messages: ['instance_id', 'id'],
  chat_peers: ['instance_id', 'jid'],
  call_settings: ['instance_id'],
  dashboard_sessions: ['id_hash'],
  idempotency_keys: ['key'],
};

/** A store migrated up to (and including) 0014, in a fresh SQLite file or PostgreSQL schema. */
async function storeAt0014(dialect: TestDialect): Promise<{ store: Store; cleanup: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-times-'));
  const store =
    dialect === 'sqlite'
      ? await openStore({ dialect: 'sqlite', path: join(dataDir, 'parley.db') })
      : await openStore(
          { dialect: 'postgres', url: process.env.TEST_DATABASE_URL ?? '' },
          { schema: `t_${randomBytes(6).toString('hex')}`, poolSize: 2 },
        );
  const { error } = await migrator(store).migrateTo('0014_idempotency_keys');
  if (error) throw error;
  return {
    store,
    cleanup: async () => {
      await store.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Migrates `store` up to 0015 and no further: later migrations (0016 adds a column to `organizations`) are not what
 * these tests compare, and `migrateDown` must undo 0015 itself.
 * @throws the migration's error.
 */
async function migrateTo0015(store: Store): Promise<void> {
  const { error } = await migrator(store).migrateTo('0015_times_as_epoch_ms');
  if (error) throw error;
}

function migrator(store: Store): Migrator {
  return new Migrator({
    db: store.db,
    provider: migrationProvider,
    ...(store.schema === undefined ? {} : { migrationTableSchema: store.schema }),
  });
}

/** Every row of `table` ordered by its key, as plain objects. */
async function rowsOf(db: Store['db'], table: string): Promise<Record<string, unknown>[]> {
  const order = ORDER[table] ?? ['id'];
  const result = await sql<Record<string, unknown>>`select * from ${sql.table(table)} order by ${sql.join(
    order.map((column) => sql.ref(column)),
  )}`.execute(db);
  return result.rows;
}

/** The time columns of `rows` only. */
function timesOf(table: string, rows: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const columns = TIME_COLUMNS[table] ?? [];
  return rows.map((row) => Object.fromEntries(columns.map((column) => [column, row[column]])));
}

/** The declared type of every column of {@link TIME_COLUMNS}, as `table.column` → lowercase type name. */
async function timeColumnTypes(store: Store): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [table, columns] of Object.entries(TIME_COLUMNS)) {
    const result =
      store.dialect === 'sqlite'
        ? await sql<{
            name: string;
            type: string;
          }>`select name, type from pragma_table_info(${table})`.execute(store.db)
        : await sql<{
            name: string;
            type: string;
          }>`select column_name as name, data_type as type from information_schema.columns where table_schema = ${store.schema ?? ''} and table_name = ${table}`.execute(
            store.db,
          );
    for (const row of result.rows) {
      if (columns.includes(row.name)) out[`${table}.${row.name}`] = row.type.toLowerCase();
    }
  }
  return out;
}

/** Index names of the store (SQLite: `sqlite_master`; PostgreSQL: the store's schema), automatic ones excluded. */
async function indexNames(store: Store): Promise<string[]> {
  const result =
    store.dialect === 'sqlite'
      ? await sql<{
          name: string;
        }>`select name from sqlite_master where type = 'index' and sql is not null order by name`.execute(
          store.db,
        )
      : await sql<{
          name: string;
        }>`select indexname as name from pg_indexes where schemaname = ${store.schema ?? ''} order by indexname`.execute(
          store.db,
        );
  return result.rows.map((row) => row.name);
}

/** SQLite: each table's stored `CREATE TABLE` text (empty on PostgreSQL). */
async function definitions(store: Store): Promise<Map<string, string>> {
  if (store.dialect !== 'sqlite') return new Map();
  const result = await sql<{
    name: string;
    sql: string;
  }>`select name, sql from sqlite_master where type = 'table' order by name`.execute(store.db);
  return new Map(result.rows.map((row) => [row.name, row.sql]));
}

for (const dialect of testDialects()) {
  describe(`migration 0015: times as epoch ms (${dialect})`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    let indexesBefore: string[];
    let definitionsBefore: Map<string, string>;
    const db = () => store.db as unknown as Kysely<Record<string, Record<string, unknown>>>;

    before(async () => {
      ({ store, cleanup } = await storeAt0014(dialect));
      for (const [table, rows] of Object.entries(ROWS)) await db().insertInto(table).values(rows).execute();
      indexesBefore = await indexNames(store);
      definitionsBefore = await definitions(store);
      await migrateTo0015(store);
    });
    after(() => cleanup());

    it('turns every RFC 3339 time into exactly its epoch ms and keeps NULLs', async () => {
      for (const [table, rows] of Object.entries(ROWS)) {
        const expected = timesOf(table, rows).map((row) =>
          Object.fromEntries(
            Object.entries(row).map(([column, value]) => [
              column,
              value === null ? null : Date.parse(String(value)),
            ]),
          ),
        );
        assert.deepEqual(timesOf(table, await rowsOf(store.db, table)), expected, table);
      }
      // Spelled out once, so the expectation does not rest on Date.parse alone.
      const [org] = await rowsOf(store.db, 'organizations');
      assert.equal(org?.created_at, 1_768_478_520_123);
      const [k1, k2] = await rowsOf(store.db, 'api_keys');
      assert.deepEqual(
        [k1?.expires_at, k1?.revoked_at, k1?.last_used_at, k2?.expires_at],
        [2_147_483_648_000, 1_768_478_520_999, 946_684_799_001, null],
      );
    });

    it('keeps the other columns, the indexes and the foreign keys', async () => {
      const [instance] = await rowsOf(store.db, 'instances');
      assert.deepEqual(
        { id: instance?.id, org: instance?.org_id, name: instance?.name, state: instance?.desired_state },
        { id: 'i1', org: 'org', name: 'one', state: 'disconnected' },
      );
      assert.deepEqual(await indexNames(store), indexesBefore);
      const types = await timeColumnTypes(store);
      const columns = Object.entries(TIME_COLUMNS).flatMap(([table, names]) =>
        names.map((n) => `${table}.${n}`),
      );
      assert.deepEqual(
        types,
        Object.fromEntries(columns.map((column) => [column, 'bigint'])),
        'every time column is bigint',
      );
      if (dialect === 'sqlite') {
        // The rebuilt tables are the old ones but for the time columns' type: constraints, defaults, order.
        const expected = new Map(
          [...definitionsBefore].map(([table, text]) => [
            table,
            (TIME_COLUMNS[table] ?? []).reduce(
              (ddl, column) => ddl.replace(`"${column}" varchar(30)`, `"${column}" bigint`),
              text,
            ),
          ]),
        );
        assert.deepEqual(await definitions(store), expected);
      }
      await assert.rejects(
        db()
          .insertInto('instances')
          .values({ id: 'i3', org_id: 'nowhere', env: 'test', name: 'x', created_at: 1 })
          .execute(),
        'an instance of no organization is refused',
      );
      await assert.rejects(
        db()
          .insertInto('organizations')
          .values({ id: 'o2', name: 'acme', plan: 'free', created_at: 1 })
          .execute(),
        'organization names stay unique',
      );
      await assert.rejects(
        db()
          .insertInto('organizations')
          .values({ id: 'o3', name: 'b', plan: 'free', created_at: null })
          .execute(),
        'a time column that was NOT NULL stays so',
      );
    });

    it('converts any millisecond exactly (a spread of times)', async () => {
      const times = Array.from({ length: 400 }, (_, i) => 946_684_800_000 + i * 7_919_876_543 + (i % 1000));
      const rows = times.map((ms, i) => ({ instance_id: 'i2', signature: `s${i}`, expires_at: ms }));
      await db().insertInto('gateway_replay').values(rows).execute();
      const { error } = await migrator(store).migrateDown();
      if (error) throw error;
      const asText = await sql<{
        signature: string;
        expires_at: string;
      }>`select signature, expires_at from gateway_replay where instance_id = 'i2' order by signature`.execute(
        store.db,
      );
      const bySignature = new Map(asText.rows.map((row) => [row.signature, row.expires_at]));
      for (const [i, ms] of times.entries())
        assert.equal(bySignature.get(`s${i}`), new Date(ms).toISOString());
      await migrateTo0015(store);
      const back = await sql<{
        signature: string;
        expires_at: number;
      }>`select signature, expires_at from gateway_replay where instance_id = 'i2'`.execute(store.db);
      const msBySignature = new Map(back.rows.map((row) => [row.signature, Number(row.expires_at)]));
      for (const [i, ms] of times.entries()) assert.equal(msBySignature.get(`s${i}`), ms);
      await db().deleteFrom('gateway_replay').where('instance_id', '=', 'i2').execute();
    });

    it('down gives the original text back', async () => {
      const { error } = await migrator(store).migrateDown();
      if (error) throw error;
      for (const [table, rows] of Object.entries(ROWS)) {
        assert.deepEqual(timesOf(table, await rowsOf(store.db, table)), timesOf(table, rows), table);
      }
      await migrateTo0015(store);
    });

    if (dialect === 'sqlite') {
      it('leaves foreign keys enforced on the connection', async () => {
        const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
        assert.equal(pragma.rows[0]?.foreign_keys, 1);
      });
    }
  });
}

for (const dialect of testDialects()) {
  describe(`migration 0015 refuses a value that is not a time (${dialect})`, () => {
    it('fails, names the column on SQLite, and leaves the store as it was', async () => {
      const { store, cleanup } = await storeAt0014(dialect);
      try {
        const db = store.db as unknown as Kysely<Record<string, Record<string, unknown>>>;
        await db
          .insertInto('organizations')
          .values(ROWS.organizations ?? [])
          .execute();
        const [key] = ROWS.api_keys ?? [];
        await db
          .insertInto('api_keys')
          .values({ ...key, revoked_at: 'not a time' })
          .execute();
        await assert.rejects(
          migrateToLatest(store),
          dialect === 'sqlite' ? /api_keys\.revoked_at: 1 values are not times/ : /invalid input syntax/,
        );
        const [org] = await rowsOf(store.db, 'organizations');
        assert.equal(org?.created_at, T1, 'nothing converted');
        const [stored] = await rowsOf(store.db, 'api_keys');
        assert.equal(stored?.revoked_at, 'not a time');
        const applied = await migrator(store).getMigrations();
        assert.equal(applied.find((m) => m.name === '0015_times_as_epoch_ms')?.executedAt, undefined);
        if (dialect === 'sqlite') {
          const pragma = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
          assert.equal(pragma.rows[0]?.foreign_keys, 1, 'foreign keys enforced again');
        }
      } finally {
        await cleanup();
      }
    });
  });
}
