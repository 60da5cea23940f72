import type { Kysely } from 'kysely';

/**
 * An endpoint's previous secret (docs/decisions/0094-secret-rotation-grace.md): `webhook_endpoints.previous_secret`
 * holds the secret a `rotate-secret` replaced, sealed with the SecretBox as `secret` is (the sealed text moves from
 * one column to the other), and `previous_secret_expires_at` (epoch ms) when it stops signing. Until then every
 * attempt to the endpoint is signed with both secrets, the current one first. Both are null for an endpoint never
 * rotated, one rotated with no grace, and every row stored before this migration (nothing to carry over: an older
 * version kept no previous secret).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('previous_secret', 'text').execute();
  await db.schema.alterTable('webhook_endpoints').addColumn('previous_secret_expires_at', 'bigint').execute();
}

/** Drops the columns (an older version signs with the current secret only). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('previous_secret_expires_at').execute();
  await db.schema.alterTable('webhook_endpoints').dropColumn('previous_secret').execute();
}
