import type { Kysely } from 'kysely';

/**
 * `idempotency_keys.request_id` (text, null by default): a UUID naming the request a claim belongs to, drawn when a
 * request first claims the key (a new row, or one that expired) and kept by a retry that takes over the unfinished
 * claim of a process that died (docs/decisions/0010-idempotency.md). A send made under the claim is stored under a
 * message id that follows from it, so such a retry finds that send instead of sending a second message. Rows
 * claimed before it get one at their next claim.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').addColumn('request_id', 'text').execute();
}

/** Drops the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').dropColumn('request_id').execute();
}
