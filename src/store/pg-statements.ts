import { createHash } from 'node:crypto';
import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';
import { isSessionSwitch, isStaleStatement, markDeclaredReadOnly, READ_ONLY_TRANSACTION } from './faults.ts';
import { KEY_LOOKUPS, withKeyLookups } from './pg-key-lookups.ts';
import { afterBegin, commitBehind, rolledBack, TransactionRolledBack } from './pg-pipelining.ts';

/**
 * Named prepared statements on PostgreSQL (docs/decisions/0055-named-statements.md).
 *
 * `pg` runs a statement with parameters as an unnamed statement: the server parses and plans it at every execution.
 * Given a name, `pg` sends its Parse message once per connection and afterwards only Bind and Execute, and the
 * server reuses the parsed statement and, once it chooses to, a generic plan (PostgreSQL documentation, "PREPARE",
 * and the extended query protocol of chapter 55). This module gives every distinct statement text that carries
 * parameters a name of its own, up to a bound, through a pool adapter that Kysely's `PostgresDialect` takes in
 * place of the `pg.Pool`. Statements without parameters (`begin`, `commit`) keep the simple query protocol.
 *
 * A name is a digest of the statement's text and the store's schema, so a name means one statement in every
 * process and every version: a server session reached through a pooler may hold another node's statements, and a
 * name that meant another text there would run the wrong statement with this one's parameters.
 */

/**
 * A statement text that starts with this comment always runs unnamed, so PostgreSQL plans it at each run with the
 * tables' current sizes and the parameters' values: for statements whose best plan depends on them (a lookup of an
 * array of keys, `unnest` of arrays), a generic plan made once while a table was small (a sequential scan) would stay
 * while the table grows.
 */
export const PLAN_EACH_RUN = '/* plan each run */';

/** Distinct statement texts named per store by default; later texts run unnamed. */
export const DEFAULT_NAMED_STATEMENTS = 500;

/** Options of {@link namedStatementPool}. */
export interface NamedStatementOptions {
  /**
   * False runs every statement unnamed from the start (`DATABASE_PREPARED_STATEMENTS=off`, for a pooler that cannot
   * carry names); a transaction's `begin` is still sent with its first statement. Default true.
   */
  naming?: boolean;
  /** Most distinct statement texts given a name (default {@link DEFAULT_NAMED_STATEMENTS}); the rest run unnamed. */
  limit?: number;
  /** The schema the store's `search_path` names, part of every name's digest (default: none). */
  schema?: string;
  /**
   * Called once when the pool stops naming statements because the server session under a connection changed (a
   * pooler in transaction mode, {@link isSessionSwitch}); given the error that showed it. The store logs it.
   */
  onSessionSwitch?: (error: Error) => void;
}

/** Characters of the SHA-256 digest (hex) a statement's name carries: 128 bits. */
const NAME_DIGEST_CHARS = 32;

/**
 * The name of statement `text` in a store whose schema is `schema`: `parley_` and the first
 * {@link NAME_DIGEST_CHARS} hex digits of SHA-256 over both (39 characters, under PostgreSQL's 63-byte limit on
 * identifiers).
 */
export function statementName(text: string, schema = ''): string {
  const digest = createHash('sha256').update(schema).update('\0').update(text).digest('hex');
  return `parley_${digest.slice(0, NAME_DIGEST_CHARS)}`;
}

/** What this adapter knows about one server session (one `pg` client). */
interface SessionState {
  /** Between `begin` and `commit`/`rollback`: a failed statement has aborted the transaction, so nothing is retried. */
  inTransaction: boolean;
  /**
   * The session is not to be kept: a named statement of it can no longer run, or a statement ran outside the
   * transaction it was meant for. It is closed when it goes back to the pool.
   */
  stale: boolean;
  /** The `begin` of the open transaction while it waits for the transaction's first statement, not yet sent. */
  pendingBegin: string | undefined;
  /** The open transaction was begun `read only` (`start transaction … read only`): a write refused in it is a bug. */
  readOnly: boolean;
  /**
   * The open transaction's statements sent and not answered yet. A caller that does not wait for its transaction's
   * last statement (`runLast`, src/store/last-statement.ts) leaves it here, and the `commit` goes out behind it.
   */
  unanswered: Set<Promise<unknown>>;
  /** Counts the transactions begun on the session: a statement's failure is the open transaction's only if it ran in it. */
  transaction: number;
  /**
   * The first failure of a statement of the open transaction, recorded as `pg` reports it: a value it cannot bind
   * fails the statement before `client.query` returns, and the server never sees it, so the server's transaction
   * would commit without it. A `commit` that finds one rolls back instead and fails with it.
   */
  failed: unknown;
}

/** The answer a `begin`, `commit` or `rollback` that never needed the server gets: what PostgreSQL would return. */
function localResult<R>(command: 'BEGIN' | 'COMMIT' | 'ROLLBACK'): PostgresQueryResult<R> {
  return { command, rowCount: 0, rows: [] } as unknown as PostgresQueryResult<R>;
}

/** How a statement without parameters moves the session's transaction state, if it does. */
function transactionEffect(text: string): 'begin' | 'end' | undefined {
  const head = text.trimStart().slice(0, 20).toLowerCase();
  if (head.startsWith('begin') || head.startsWith('start transaction')) return 'begin';
  if (head.startsWith('commit') || head.startsWith('end')) return 'end';
  if (head.startsWith('rollback') && !head.startsWith('rollback to')) return 'end';
  return undefined;
}

/** Whether a `begin`/`start transaction` statement opens a `read only` transaction (PostgreSQL "SET TRANSACTION"). */
function isReadOnlyBegin(text: string): boolean {
  return /\bread\s+only\b/i.test(text);
}

/**
 * A pool for Kysely's `PostgresDialect` over `pool` that runs each statement with parameters as a named prepared
 * statement: the name is a digest of the statement's text ({@link statementName}), so each connection prepares a
 * text once and a name never means two texts (unless `naming` is false: then every statement runs unnamed).
 *
 * When `pool` was made with `pipeline: true`, a transaction's `begin` is held back and written with the
 * transaction's first statement, in one write and one round trip (docs/decisions/0062-pipelined-begin.md): a
 * transaction that runs no statement never reaches the server, and a held `begin` is dropped when its connection
 * goes back to the pool.
 *
 * A prepared statement outlives a schema change made by another process (a migration of a newer node): PostgreSQL
 * re-plans it, but refuses it with SQLSTATE 0A000 when the columns it returns changed. Then the connection is
 * closed when it goes back to the pool (a new one prepares afresh), and a statement run outside a transaction is
 * run again at once, unnamed, on the same connection; inside a transaction, which the error has aborted, the error
 * goes to the caller.
 *
 * A statement missing from the session (26000) or a name the session already holds (42P05) means the connection
 * does not keep its server session: a pooler in transaction mode is between. Then the whole pool stops naming
 * statements for good (`onSessionSwitch` is told once), the statement is run again unnamed outside a transaction,
 * and inside one the error goes to the caller (a store fault, retried where store faults are).
 */
export function namedStatementPool(pool: pg.Pool, options: NamedStatementOptions = {}): PostgresPool {
  /** Only a pool whose clients pipeline can send a `begin` with the statement after it. */
  const pipelining = pool.options.pipeline === true;
  const limit = options.limit ?? DEFAULT_NAMED_STATEMENTS;
  const names = new Map<string, string>();
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  /** False when turned off, or once a session switch was seen: every statement runs unnamed from then on. */
  let naming = options.naming ?? true;

  const nameOf = (text: string): string | undefined => {
    if (!naming || text.startsWith(PLAN_EACH_RUN)) return undefined;
    const known = names.get(text);
    if (known !== undefined || names.size >= limit) return known;
    const name = statementName(text, options.schema);
    names.set(text, name);
    return name;
  };

  const stopNaming = (error: Error): void => {
    if (!naming) return;
    naming = false;
    options.onSessionSwitch?.(error);
  };

  const adapt = (client: pg.PoolClient): PostgresPoolClient => {
    const state: SessionState = {
      inTransaction: false,
      stale: false,
      pendingBegin: undefined,
      readOnly: false,
      unanswered: new Set(),
      transaction: 0,
      failed: undefined,
    };
    /** Forgets the open transaction: its `begin`, its unanswered statements and its failure. */
    const endTransaction = (): void => {
      state.pendingBegin = undefined;
      state.readOnly = false;
      state.unanswered.clear();
      state.failed = undefined;
      state.inTransaction = false;
    };
    /**
     * Sends `config` the callback way, → its result: a failure `pg` finds while writing the query (a value it cannot
     * bind) calls back before `client.query` returns, so it is on the open transaction's record before the caller
     * can send anything after it (the `commit` included).
     */
    const submit = <T>(config: string | pg.QueryConfig): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        const transaction = state.inTransaction ? state.transaction : undefined;
        const fail = (error: unknown): void => {
          if (transaction !== undefined && transaction === state.transaction && state.inTransaction) {
            state.failed ??= error;
          }
          const code = (error as { code?: unknown }).code;
          if (code === READ_ONLY_TRANSACTION && transaction !== undefined && state.readOnly) {
            // A write in a transaction begun `read only`: the caller's bug, not a server refusing writes. Waiting it
            // out would retry it for ever; the connection is sound and kept.
            markDeclaredReadOnly(error);
            reject(error);
            return;
          }
          // A named statement that failed in `pg` itself (no SQLSTATE: a value it could not bind) was closed by
          // `pg` on the server while `pg` still counts it as prepared: the session is not kept. Nor is one whose
          // server refuses writes (a standby a failover left at the address): the next connection may reach the
          // promoted server (docs/decisions/0011-store-faults.md).
          if (
            (typeof config !== 'string' && config.name !== undefined && code === undefined) ||
            code === READ_ONLY_TRANSACTION
          )
            state.stale = true;
          reject(error);
        };
        try {
          client.query(config, (error: Error | null, result: unknown) => {
            if (error === null || error === undefined) resolve(result as T);
            else fail(error);
          });
        } catch (error) {
          fail(error);
        }
      });
    /** Runs one query, with the transaction's `begin` ahead of it when that is still to be sent. */
    const send = <R>(query: () => Promise<R>): Promise<R> => {
      const begin = state.pendingBegin;
      state.pendingBegin = undefined;
      const sent =
        begin === undefined
          ? query()
          : // A statement that ran outside the transaction it was meant for: the session is closed on release, as
            // a stale one is, and the caller fails with BEGIN's error.
            afterBegin(client, begin, query, () => {
              state.stale = true;
            });
      if (!state.inTransaction || !pipelining) return sent;
      const { unanswered } = state;
      unanswered.add(sent);
      const answered = (): void => {
        unanswered.delete(sent);
      };
      sent.then(answered, answered);
      return sent;
    };
    const run = async <R>(text: string, values: readonly unknown[]): Promise<PostgresQueryResult<R>> => {
      const parameters = [...values];
      if (parameters.length === 0) {
        const effect = transactionEffect(text);
        if (effect === 'begin' && !state.inTransaction && pipelining) {
          // Sent with the transaction's first statement; a transaction that runs none never reaches the server.
          endTransaction();
          state.pendingBegin = text;
          state.readOnly = isReadOnlyBegin(text);
          state.inTransaction = true;
          state.transaction += 1;
          return localResult('BEGIN');
        }
        const rollback = effect === 'end' && text.trimStart().toLowerCase().startsWith('rollback');
        if (effect === 'end' && state.pendingBegin !== undefined) {
          endTransaction();
          return localResult(rollback ? 'ROLLBACK' : 'COMMIT');
        }
        if (effect === 'end') {
          // A failure `pg` reports on the next tick (a query it refused to write) is on record before a commit
          // written behind unanswered statements leaves; it costs no round trip.
          if (!rollback && state.unanswered.size > 0)
            await new Promise<void>((resolve) => process.nextTick(resolve));
          const unanswered = [...state.unanswered];
          const { failed } = state;
          endTransaction();
          if (!rollback && failed !== undefined) {
            // A statement failed, perhaps one the server never saw: nothing of the transaction may be committed.
            await client.query('rollback').catch(() => undefined);
            throw failed;
          }
          if (!rollback && unanswered.length > 0)
            return commitBehind<PostgresQueryResult<R>>(client, text, unanswered);
          const result = await client.query(text);
          if (!rollback && rolledBack(result)) throw new TransactionRolledBack();
          return result as unknown as PostgresQueryResult<R>;
        }
        const result = await send(() => submit(text));
        // Back to a savepoint: the server's transaction is sound again, and what failed after the savepoint is undone.
        if (/^\s*rollback\s+to\b/i.test(text)) state.failed = undefined;
        if (effect === 'begin') {
          state.readOnly = isReadOnlyBegin(text);
          state.inTransaction = true;
          state.transaction += 1;
        }
        return result as unknown as PostgresQueryResult<R>;
      }
      const name = nameOf(text);
      // Read now: a `commit` written behind this statement ends the transaction before its answer comes.
      const inTransaction = state.inTransaction;
      const execute = text.startsWith(KEY_LOOKUPS)
        ? (config: pg.QueryConfig) => withKeyLookups(client, inTransaction, submit, () => submit(config))
        : submit;
      if (name === undefined)
        return (await send(() => execute({ text, values: parameters }))) as unknown as PostgresQueryResult<R>;
      try {
        return (await send(() =>
          execute({ name, text, values: parameters }),
        )) as unknown as PostgresQueryResult<R>;
      } catch (error) {
        if (!isStaleStatement(error)) throw error;
        if (isSessionSwitch(error)) stopNaming(error instanceof Error ? error : new Error(String(error)));
        else state.stale = true;
        if (inTransaction) throw error;
        // Through `submit`, as every statement: a write it finds refused (25006) closes this connection too.
        return (await execute({ text, values: parameters })) as unknown as PostgresQueryResult<R>;
      }
    };
    return {
      query: run as PostgresPoolClient['query'],
      release: () => {
        // A transaction's every path ends in `commit` or `rollback`; a `begin` still pending here belongs to none.
        endTransaction();
        if (!state.stale) {
          client.release();
          return;
        }
        // A released error makes pg-pool close the connection instead of keeping it idle.
        state.stale = false;
        clients.delete(client);
        client.release(
          new Error(
            'closed: a stale prepared statement, a statement run outside its transaction, or a server refusing writes',
          ),
        );
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
