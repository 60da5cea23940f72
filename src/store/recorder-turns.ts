import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';
import { AdvanceBarrier, type Advanced } from './shared-advances.ts';
import { MAX_TURN_TRANSACTION, type TransactionWork, TurnTransactions } from './turn-transactions.ts';
import { collectWrites, runWriteGroup, takeDeferredWrites } from './write-groups.ts';

/** A part's outcome once it settled. */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * A part's own view of the shared transaction `trx`: the same connection and statements, but a distinct object, so
 * what the projections keep by transaction (their buffered rows, the writes put off to the group, the event row that
 * tells a lost commit) stays the part's own.
 */
function viewOf(trx: Transaction<Database>): Transaction<Database> {
  return new Proxy(trx, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The recorder's batches of a turn of the event loop in one PostgreSQL transaction, their statements shared
 * (docs/decisions/0082-recorder-turns-on-postgres.md): the batches of several instances ready in the same turn
 * (`TurnGroup`, src/ops/turn-group.ts, at most {@link MAX_TURN_TRANSACTION} events) take their sequence numbers in
 * one statement ({@link AdvanceBarrier}) and write their rows in one write group, the transaction's last statement
 * with its commit behind it (docs/decisions/0056-write-groups.md, 0063-pipelined-commit.md): a turn's events cost a
 * handful of statements and one commit, where each instance's batch had a transaction, a commit and four statements
 * of its own. Each batch runs in its own view of the transaction, one at a time (until it waits for its numbers, then
 * again after them), so no two run statements at once on the connection. A batch alone in its turn has a
 * transaction of its own, as before, whose write group is that transaction's last statement too, the commit behind it
 * ({@link runAlone}). → a {@link TurnTransactions} on `db` (a PostgreSQL store's) whose parts run so.
 *
 * Failures keep each batch's own: a shared transaction that fails is run again one batch per transaction, so a bad
 * batch fails alone; an unreachable store fails each batch at once (each then asks, as before, whether a commit
 * whose answer was lost kept it: the event row it asks by is its own view's).
 */
export function recorderTurns(db: Kysely<Database>): TurnTransactions {
  return new TurnTransactions(db, runTogether, runAlone);
}

/**
 * Runs `parts` in `trx`: each in its own view, one at a time until it waits for its sequence numbers or ends; then
 * the numbers of all in one statement, and each waiting part resumed in turn to its end; then every part's put-off
 * writes in one group, the transaction's last statement. → each part's result, in order.
 * @throws the first error a part or a statement failed with (the transaction then rolls back).
 */
async function runTogether(
  trx: Transaction<Database>,
  parts: readonly TransactionWork<unknown>[],
): Promise<unknown[]> {
  const barrier = new AdvanceBarrier(trx);
  const views = parts.map(() => {
    const view = viewOf(trx);
    collectWrites(view);
    barrier.join(view);
    return view;
  });
  const outcomes: Promise<Outcome>[] = [];
  /** Ends every part still waiting with `error`, waits for all to settle, and throws `error`. */
  const fail = async (error: unknown): Promise<never> => {
    barrier.abort(error);
    await Promise.all(outcomes);
    throw error;
  };
  for (const [index, part] of parts.entries()) {
    const view = views[index] as Transaction<Database>;
    barrier.current = index;
    const outcome = Promise.resolve()
      .then(() => part(view))
      .then(
        (value): Outcome => ({ ok: true, value }),
        (error: unknown): Outcome => ({ ok: false, error }),
      );
    outcomes.push(outcome);
    await barrier.untilWaitingOr(outcome);
    if (barrier.isWaiting(index)) continue;
    // The part ended without numbers to take (no webhook event, or none of its instance): a failure ends them all.
    const settled = await outcome;
    if (!settled.ok) return fail(settled.error);
  }
  let advanced: Advanced[];
  try {
    advanced = await barrier.advanceAll();
  } catch (error) {
    return fail(error);
  }
  for (const [index, { waiter, row }] of advanced.entries()) {
    barrier.current = waiter.part;
    waiter.resolve(row);
    const outcome = (await outcomes[waiter.part]) as Outcome;
    if (!outcome.ok) {
      // The parts not resumed yet end with the same error.
      for (const rest of advanced.slice(index + 1)) rest.waiter.reject(outcome.error);
      return fail(outcome.error);
    }
  }
  const results: unknown[] = [];
  for (const outcome of outcomes) {
    const settled = await outcome;
    if (!settled.ok) return fail(settled.error);
    results.push(settled.value);
  }
  await runWriteGroup(
    trx,
    views.flatMap((view) => takeDeferredWrites(view)),
    { last: true },
  );
  return results;
}

/**
 * Runs `part`, a batch alone in `trx` (a transaction of its own), taking its numbers with its own statement, and its
 * put-off writes as one group after it, the transaction's last statement: the commit goes out behind it
 * (docs/decisions/0063-pipelined-commit.md), so a lone batch costs the round trips of a shared transaction and not
 * one more for its commit. The recorder's batch cannot tell this transaction from a shared one, so it leaves its
 * writes to the owner here as it does there. → the part's result.
 * @throws the part's error, or the group's (the transaction then rolls back).
 */
async function runAlone(trx: Transaction<Database>, part: TransactionWork<unknown>): Promise<unknown> {
  collectWrites(trx);
  const result = await part(trx);
  await runWriteGroup(trx, takeDeferredWrites(trx), { last: true });
  return result;
}
