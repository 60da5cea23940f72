import { type Kysely, PostgresAdapter, sql, type Transaction } from 'kysely';
import { errors } from '../domain/errors.ts';
import type { Database } from './schema.ts';

/** How long a read after a lost commit waits for a transaction still holding the rows it waits on, ms. */
export const LOST_COMMIT_LOCK_TIMEOUT_MS = 5_000;

/** SQLSTATE of `lock_not_available`: `lock_timeout` passed. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Reads, with `read`, what a transaction whose `commit` lost its answer left in the store (docs/decisions/0011-store-
 * faults.md). On PostgreSQL that commit may still be running on the server when the question comes on another
 * connection, its rows invisible until it ends: `wait` first takes locks the lost transaction held (a row it locked
 * or wrote), which waits for it to end, for at most {@link LOST_COMMIT_LOCK_TIMEOUT_MS}; `read` then runs in the same
 * read-committed transaction and sees what it committed. SQLite's one connection sees its own commits: `read` alone.
 * @throws DomainError store_unavailable when a transaction still holds the rows after the timeout (ask again later);
 *   the store's error.
 */
export async function readAfterLostCommit<T>(
  db: Kysely<Database>,
  wait: (trx: Transaction<Database>) => Promise<unknown>,
  read: (reader: Kysely<Database>) => Promise<T>,
): Promise<T> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return read(db);
  try {
    return await db.transaction().execute(async (trx) => {
      await sql`set local lock_timeout = ${sql.lit(`${LOST_COMMIT_LOCK_TIMEOUT_MS}ms`)}`.execute(trx);
      await wait(trx);
      return read(trx);
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === LOCK_NOT_AVAILABLE) throw errors.storeUnavailable(error);
    throw error;
  }
}
