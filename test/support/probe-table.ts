import { randomBytes } from 'node:crypto';
import { type QueryExecutorProvider, sql } from 'kysely';
import type pg from 'pg';
import { openStore, type Store } from '../../src/store/database.ts';
import type { FlightProxy } from './flight-proxy.ts';

/**
 * The `probe (id integer primary key)` table the PostgreSQL statement-adapter tests write to
 * (test/store/pg-pipelined-begin.test.ts, test/store/pg-pipelined-commit.test.ts), and the URL that reaches the
 * server through their round-trip counting proxy.
 */

/** The ids in `schema`'s `probe`, in order, read from `admin`, a connection of its own. */
export async function probeIds(admin: pg.Client, schema: string): Promise<number[]> {
  const result = await admin.query<{ id: number }>(`select id from ${schema}.probe order by id`);
  return result.rows.map((row) => row.id);
}

/** Inserts `id` into `probe` on `db`. */
export function insertProbe(db: QueryExecutorProvider, id: number) {
  return sql`insert into probe (id) values (${id})`.execute(db);
}

/** `url` (a PostgreSQL URL) with its host and port replaced by `proxy`'s on 127.0.0.1. */
export function urlThrough(url: URL, proxy: FlightProxy): string {
  const through = new URL(url.toString());
  through.hostname = '127.0.0.1';
  through.port = String(proxy.port);
  return through.toString();
}

/**
 * A PostgreSQL store of one connection at `url`, in `schema` when given (an existing one, left as it is), else in a
 * fresh schema holding an empty `probe`; `preparedStatements` as `DATABASE_PREPARED_STATEMENTS` (default on). The
 * caller destroys it.
 */
export async function openProbeStore(
  url: string,
  options: { schema?: string; preparedStatements?: boolean } = {},
): Promise<{ store: Store; schema: string }> {
  const schema = options.schema ?? `t_${randomBytes(6).toString('hex')}`;
  const store = await openStore(
    { dialect: 'postgres', url, preparedStatements: options.preparedStatements ?? true },
    { schema, poolSize: 1 },
  );
  if (options.schema === undefined) await sql`create table probe (id integer primary key)`.execute(store.db);
  return { store, schema };
}
