import type { Kysely } from 'kysely';

/**
 * `send_pacing.new_chats_locked_until` (bigint, epoch ms) and `new_chats_lock_reason` (text), both null by default:
 * the platform's reach-out timelock of the instance, stored like the restriction pause (docs/decisions/0013-
 * pacing.md), so a restart or another node holding the instance keeps holding the queued sends that open a chat
 * until its end, and reports it `resumed` then. Before it, the timelock lived in the holding process's memory only.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_pacing').addColumn('new_chats_locked_until', 'bigint').execute();
  await db.schema.alterTable('send_pacing').addColumn('new_chats_lock_reason', 'text').execute();
}

/** Drops the columns. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_pacing').dropColumn('new_chats_lock_reason').execute();
  await db.schema.alterTable('send_pacing').dropColumn('new_chats_locked_until').execute();
}
