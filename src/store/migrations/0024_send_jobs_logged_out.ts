import type { Kysely } from 'kysely';

/**
 * `send_jobs.logged_out_at` (epoch ms, null by default): the time of the logout that found the job being relayed
 * (`sending`) and so could not cancel it (docs/decisions/0074-logout-cancels-pending-sends.md). A job marked so is
 * never made `pending` again: a relay that holds it back, or a new holder that hands it back, cancels it instead
 * (src/store/send-job-claims.ts). A relay that ends it `sent` or `failed` ends it as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_jobs').addColumn('logged_out_at', 'bigint').execute();
}

/** Drops the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_jobs').dropColumn('logged_out_at').execute();
}
