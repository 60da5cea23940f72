import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';
import { isStaleStatement } from './faults.ts';

/**
 * Named prepared statements on PostgreSQL (docs/decisions/0055-named-statements.md).
 *
 * `pg` runs a statement with parameters as an unnamed statement: the server parses and plans it at every execution.
 * Given a name, `pg` sends its Parse message once per connection and afterwards only Bind and Execute, and the
 * server reuses the parsed statement and, once it chooses to, a generic plan (PostgreSQL documentation, "PREPARE",
 * and the extended query protocol of chapter 55). This module gives every distinct statement text that carries
 * parameters a name of its own, up to a bound, through a pool adapter that Kysely's `PostgresDialect` takes in
 * place of the `pg.Pool`. Statements without parameters (`begin`, `commit`) keep the simple query protocol.
 */

/** Distinct statement texts named per store by default; later texts run unnamed. */
export const DEFAULT_NAMED_STATEMENTS = 500;

/** Options of {@link namedStatementPool}. */
export interface NamedStatementOptions {
  /** Most distinct statement texts given a name (default {@link DEFAULT_NAMED_STATEMENTS}); the rest run unnamed. */
  limit?: number;
}

/** What this adapter knows about one server session (one `pg` client). */
interface SessionState {
  /** Between `begin` and `commit`/`rollback`: a failed statement has aborted the transaction, so nothing is retried. */
  inTransaction: boolean;
  /** A named statement of this session can no longer run: the session is closed when it goes back to the pool. */
  stale: boolean;
}

/** How a statement without parameters moves the session's transaction state, if it does. */
function transactionEffect(text: string): 'begin' | 'end' | undefined {
  const head = text.trimStart().slice(0, 20).toLowerCase();
  if (head.startsWith('begin') || head.startsWith('start transaction')) return 'begin';
  if (head.startsWith('commit') || head.startsWith('end')) return 'end';
  if (head.startsWith('rollback') && !head.startsWith('rollback to')) return 'end';
  return undefined;
}

/**
 * A pool for Kysely's `PostgresDialect` over `pool` that runs each statement with parameters as a named prepared
 * statement: the name comes from the statement's text (`parley_1`, `parley_2`, … in the order texts are first
 * seen, the same on every connection of the pool), so each connection prepares a text once.
 *
 * A prepared statement outlives a schema change made by another process (a migration of a newer node): PostgreSQL
 * re-plans it, but refuses it with SQLSTATE 0A000 when the columns it returns changed, and a session can also lose
 * its statements (26000). Then the connection is closed when it goes back to the pool (a new one prepares afresh),
 * and a statement run outside a transaction is run again at once, unnamed, on the same connection; inside a
 * transaction, which the error has aborted, the error goes to the caller.
 */
export function namedStatementPool(pool: pg.Pool, options: NamedStatementOptions = {}): PostgresPool {
  const limit = options.limit ?? DEFAULT_NAMED_STATEMENTS;
  const names = new Map<string, string>();
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();

  const nameOf = (text: string): string | undefined => {
    const known = names.get(text);
    if (known !== undefined || names.size >= limit) return known;
    const name = `parley_${names.size + 1}`;
    names.set(text, name);
    return name;
  };

  const adapt = (client: pg.PoolClient): PostgresPoolClient => {
    const state: SessionState = { inTransaction: false, stale: false };
    const run = async <R>(text: string, values: readonly unknown[]): Promise<PostgresQueryResult<R>> => {
      const parameters = [...values];
      if (parameters.length === 0) {
        const result = await client.query(text);
        const effect = transactionEffect(text);
        if (effect !== undefined) state.inTransaction = effect === 'begin';
        return result as unknown as PostgresQueryResult<R>;
      }
      const name = nameOf(text);
      if (name === undefined)
        return (await client.query(text, parameters)) as unknown as PostgresQueryResult<R>;
      try {
        return (await client.query({ name, text, values: parameters })) as unknown as PostgresQueryResult<R>;
      } catch (error) {
        if (!isStaleStatement(error)) throw error;
        state.stale = true;
        if (state.inTransaction) throw error;
        return (await client.query(text, parameters)) as unknown as PostgresQueryResult<R>;
      }
    };
    return {
      query: run as PostgresPoolClient['query'],
      release: () => {
        if (!state.stale) {
          client.release();
          return;
        }
        // A released error makes pg-pool close the connection instead of keeping it idle.
        state.stale = false;
        clients.delete(client);
        client.release(new Error('closed: a prepared statement of this session went stale'));
      },
    };
  };

  return {
    connect: async () => {
      const client = await pool.connect();
      let adapted = clients.get(client);
      if (!adapted) {
        adapted = adapt(client);
        clients.set(client, adapted);
      }
      return adapted;
    },
    end: () => pool.end(),
  };
}
