import type pg from 'pg';

/**
 * Statements written on a `pg` connection without waiting for the answer of the one before
 * (docs/decisions/0062-pipelined-begin.md, docs/decisions/0063-pipelined-commit.md): a transaction's `begin` written
 * with its first statement, and its `commit` written behind its last. The named statements' pool adapter
 * (pg-statements.ts) decides when; this module writes them and sorts out whose error the caller gets.
 */

/** The socket under `client`, when `pg` exposes it: corked, several messages leave in one write. */
export function socketOf(client: pg.PoolClient): { cork(): void; uncork(): void } | undefined {
  const stream = (client as { connection?: { stream?: { cork?: unknown; uncork?: unknown } } }).connection
    ?.stream;
  return typeof stream?.cork === 'function' && typeof stream.uncork === 'function'
    ? (stream as { cork(): void; uncork(): void })
    : undefined;
}

/**
 * Sends `begin` and then what `next` sends, in one write, without waiting for BEGIN's answer: the client is in
 * `pg`'s pipeline mode, so both are on the wire before the server answers either, and the transaction costs one
 * round trip less (docs/decisions/0062-pipelined-begin.md). → `next`'s result, once both were answered.
 *
 * Each query of a pipeline has its own Sync, so a BEGIN the server refused would not stop the statement after it:
 * that statement would run, and commit, on its own. A BEGIN fails alone only when its text is wrong (Kysely writes
 * none such); on a lost connection both fail. `onOrphan` is told when it happened anyway, and the caller gets
 * BEGIN's error.
 * @throws BEGIN's error when it failed, else `next`'s.
 */
export async function afterBegin<R>(
  client: pg.PoolClient,
  begin: string,
  next: () => Promise<R>,
  onOrphan: () => void,
): Promise<R> {
  const socket = socketOf(client);
  socket?.cork();
  let began: Promise<unknown>;
  let result: Promise<R>;
  try {
    began = client.query(begin);
    // Reported below; a rejection not awaited yet (or never, when `next` throws) must not count as unhandled.
    began.catch(() => undefined);
    result = next();
  } finally {
    socket?.uncork();
  }
  const [begun, done] = await Promise.allSettled([began, result]);
  if (begun.status === 'rejected') {
    if (done.status === 'fulfilled') onOrphan();
    throw begun.reason;
  }
  if (done.status === 'rejected') throw done.reason;
  return done.value;
}

/**
 * Thrown by a `commit` that PostgreSQL answered with `ROLLBACK`: a statement of the transaction had failed, so the
 * server rolled the whole transaction back (PostgreSQL documentation, "COMMIT": an aborted transaction ends in a
 * rollback). Kysely would otherwise take the commit for done; with this error it rolls back and the caller learns
 * that nothing was kept.
 */
export class TransactionRolledBack extends Error {
  constructor() {
    super(
      'PostgreSQL answered COMMIT with ROLLBACK: a statement of the transaction failed, nothing of it was kept',
    );
    this.name = 'TransactionRolledBack';
  }
}

/**
 * Ends the open transaction with `commit` (`text`) while `unanswered` statements of it are still on their way: the
 * `commit` is written at once, behind them, so the transaction's last statement and its commit cost one round
 * trip (docs/decisions/0063-pipelined-commit.md). → the commit's result.
 * @throws the first of `unanswered` that failed (PostgreSQL then rolled the transaction back); else the commit's
 *   own error; {@link TransactionRolledBack} when the server rolled back anyway.
 */
export async function commitBehind<R>(
  client: pg.PoolClient,
  text: string,
  unanswered: readonly Promise<unknown>[],
): Promise<R> {
  const committed = client.query(text) as Promise<R>;
  // Reported below, after the statements ahead of it; a rejection not awaited yet must not count as unhandled.
  committed.catch(() => undefined);
  const settled = await Promise.allSettled(unanswered);
  const ended = (await Promise.allSettled([committed]))[0] as PromiseSettledResult<R>;
  const failed = settled.find((result) => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  if (ended.status === 'rejected') throw ended.reason;
  if (rolledBack(ended.value)) throw new TransactionRolledBack();
  return ended.value;
}

/** True when `result` is PostgreSQL's answer to a `commit` that rolled back (its command tag is `ROLLBACK`). */
export function rolledBack(result: unknown): boolean {
  return (result as { command?: unknown } | undefined)?.command === 'ROLLBACK';
}
