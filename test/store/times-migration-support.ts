import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Migrator, sql } from 'kysely';
import { openStore, type Store } from '../../src/store/database.ts';
import { TIME_COLUMNS } from '../../src/store/migrations/0015_times_as_epoch_ms.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import type { TestDialect } from '../support/store.ts';

/**
 * What the tests of migration 0015 (docs/decisions/0027-times-as-epoch-ms.md) start from and read back: rows of
 * every table with a time column as migrations 0001–0014 wrote them (RFC 3339 text), a store migrated up to 0014,
 * the step to 0015, and readers of rows, column types, indexes and table definitions on SQLite and PostgreSQL.
 */
/** A time the rows carry, with milliseconds (the others: a second's last millisecond, before 2000, past 2038). */
export const T1 = '2026-01-15T12:02:00.123Z';
const T2 = '2026-01-15T12:02:00.999Z';
const T3 = '1999-12-31T23:59:59.001Z';
const T4 = '2038-01-19T03:14:08.000Z';

/** Rows of every table with a time column, as written before migration 0015 (times as RFC 3339 text). */
export const ROWS: Record<string, Record<string, unknown>[]> = {
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
export async function storeAt0014(
  dialect: TestDialect,
): Promise<{ store: Store; cleanup: () => Promise<void> }> {
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
export async function migrateTo0015(store: Store): Promise<void> {
  const { error } = await migrator(store).migrateTo('0015_times_as_epoch_ms');
  if (error) throw error;
}

/** A Kysely migrator over parley's migrations for `store` (its schema's migration table on PostgreSQL). */
export function migrator(store: Store): Migrator {
  return new Migrator({
    db: store.db,
    provider: migrationProvider,
    ...(store.schema === undefined ? {} : { migrationTableSchema: store.schema }),
  });
}

/** Every row of `table` ordered by its key, as plain objects. */
export async function rowsOf(db: Store['db'], table: string): Promise<Record<string, unknown>[]> {
  const order = ORDER[table] ?? ['id'];
  const result = await sql<Record<string, unknown>>`select * from ${sql.table(table)} order by ${sql.join(
    order.map((column) => sql.ref(column)),
  )}`.execute(db);
  return result.rows;
}

/** The time columns of `rows` only. */
export function timesOf(table: string, rows: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const columns = TIME_COLUMNS[table] ?? [];
  return rows.map((row) => Object.fromEntries(columns.map((column) => [column, row[column]])));
}

/** The declared type of every column of {@link TIME_COLUMNS}, as `table.column` → lowercase type name. */
export async function timeColumnTypes(store: Store): Promise<Record<string, string>> {
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
export async function indexNames(store: Store): Promise<string[]> {
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
export async function definitions(store: Store): Promise<Map<string, string>> {
  if (store.dialect !== 'sqlite') return new Map();
  const result = await sql<{
    name: string;
    sql: string;
  }>`select name, sql from sqlite_master where type = 'table' order by name`.execute(store.db);
  return new Map(result.rows.map((row) => [row.name, row.sql]));
}
