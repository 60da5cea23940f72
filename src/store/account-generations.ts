import type { Kysely, Transaction } from 'kysely';
import { isPostgres } from './compiled.ts';
import type { Database } from './schema.ts';

/**
 * Moves instance `instanceId`'s account generation (`instances.account_generation`, migration 0039) on: called by a
 * logout's transaction before it cancels the account's pending sends (src/sends/logout.ts), so a send job accepted
 * under the generation before is not inserted once the logout committed
 * (docs/decisions/0074-logout-cancels-pending-sends.md). @throws the store's error.
 */
export async function nextAccountGeneration(trx: Transaction<Database>, instanceId: string): Promise<void> {
  await trx
    .updateTable('instances')
    .set((eb) => ({ account_generation: eb('account_generation', '+', 1) }))
    .where('id', '=', instanceId)
    .execute();
}

/**
 * Instance `instanceId`'s account generation now (`instances.account_generation`): what a send accepted now expects
 * its job's insert to find. -1 for an instance not stored (a job of it is never inserted).
 * @throws the store's error.
 */
export async function readAccountGeneration(db: Kysely<Database>, instanceId: string): Promise<number> {
  const row = await db
    .selectFrom('instances')
    .select('account_generation')
    .where('id', '=', instanceId)
    .executeTakeFirst();
  return row === undefined ? -1 : Number(row.account_generation);
}

/**
 * The account generations of instances `instanceIds` in transaction `trx`, by instance id (an instance not stored is
 * left out). On PostgreSQL the rows are read `for share`, in id order: a logout's transaction that moves a generation
 * ({@link nextAccountGeneration}) waits for `trx` to commit, or `trx` waits for it and reads the generation it
 * wrote, so a job `trx` inserts is either seen by the logout's cancel or refused. On SQLite the transaction holds the
 * only writer. @throws the store's error.
 */
export async function lockedAccountGenerations(
  trx: Transaction<Database>,
  instanceIds: readonly string[],
): Promise<Map<string, number>> {
  const query = trx
    .selectFrom('instances')
    .select(['id', 'account_generation'])
    .where('id', 'in', [...new Set(instanceIds)])
    .orderBy('id');
  const rows = await (isPostgres(trx) ? query.forShare() : query).execute();
  return new Map(rows.map((row) => [row.id, Number(row.account_generation)]));
}
