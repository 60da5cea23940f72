import type { CompiledQuery, Kysely } from 'kysely';
import type { Database } from './schema.ts';

/**
 * A transaction's last statement, sent without waiting for its answer where the store can take the `commit` behind
 * it (docs/decisions/0063-pipelined-commit.md).
 *
 * On PostgreSQL the statement adapter under Kysely (`namedStatementPool`, src/store/pg-statements.ts) runs its
 * clients in `pg`'s pipeline mode and keeps the open transaction's unanswered statements: a `commit` that finds some
 * is written at once, behind them, and fails with the first of them that failed. So a transaction whose last
 * statement is not waited for costs one round trip less. Elsewhere (SQLite, a pool that does not pipeline) the
 * statement is waited for as any other: there a `commit` could go out before it, or take a failed statement's
 * transaction for committed.
 */

/** Kysely adapters of the stores whose `commit` waits for the statements still unanswered: shared by a store's transactions. */
const pipelinedCommits = new WeakSet<object>();

/**
 * Marks `db` (a PostgreSQL store on `namedStatementPool` over a pool made with `pipeline: true`) as taking a `commit`
 * behind unanswered statements; its transactions share the mark. Called once, where the store is made
 * (src/store/database.ts).
 */
export function markPipelinedCommits(db: Kysely<Database>): void {
  pipelinedCommits.add(db.getExecutor().adapter);
}

/** True when `db` (a store or one of its transactions) was marked by {@link markPipelinedCommits}. */
export function commitsPipelined(db: Kysely<Database>): boolean {
  return pipelinedCommits.has(db.getExecutor().adapter);
}

/**
 * Runs `query`, the last statement of transaction `trx` before its `commit`, and waits for its answer only where the
 * `commit` cannot go out behind it (not {@link commitsPipelined}). Where it is not waited for, nothing may read its result,
 * and its failure reaches the caller as the `commit`'s error (the transaction then rolls back, as for any failed
 * statement). The query comes compiled, so nothing is left to fail in building it; it is sent at once, as Kysely
 * does for a statement run while no other of the same transaction is running. Call it only after the transaction's
 * statement before it was answered: one queued behind a busy connection could reach the server after the `commit`.
 * @throws the statement's error where it is waited for.
 */
export async function runLast(trx: Kysely<Database>, query: CompiledQuery): Promise<void> {
  const sent = trx.executeQuery(query);
  if (!commitsPipelined(trx)) {
    await sent;
    return;
  }
  // The commit reports it; this only keeps an unawaited rejection from counting as unhandled.
  sent.catch(() => undefined);
}
