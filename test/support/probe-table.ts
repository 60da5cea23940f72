import { type QueryExecutorProvider, sql } from 'kysely';
import type pg from 'pg';
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
