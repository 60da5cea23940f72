import type { Kysely } from 'kysely';

/**
 * `instances.account_generation` (integer, 0 by default): how many logouts of the instance the store recorded. A
 * recorded logout moves it in the transaction of its cancel of the account's pending sends (src/sends/logout.ts), and
 * a new send job is inserted only while it still holds the value its send was accepted under (src/store/send-jobs.ts
 * `insertAcceptedSendJobs`), so no job of an account is stored after the logout's cancel
 * (docs/decisions/0074-logout-cancels-pending-sends.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('instances')
    .addColumn('account_generation', 'integer', (column) => column.notNull().defaultTo(0))
    .execute();
}

/** Drops the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('instances').dropColumn('account_generation').execute();
}
