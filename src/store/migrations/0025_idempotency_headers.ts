import type { Kysely } from 'kysely';

/**
 * `idempotency_keys.headers` (text, null by default): the kept answer's own response headers that a replay sends
 * again (docs/decisions/0010-idempotency.md; today `Preference-Applied`), as a JSON object of lowercase names to
 * values; null when it had none. Rows kept before it replay without them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').addColumn('headers', 'text').execute();
}

/** Drops the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').dropColumn('headers').execute();
}
