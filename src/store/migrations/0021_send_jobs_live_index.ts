import { type Kysely, sql } from 'kysely';

/**
 * The send jobs' index holds live jobs only (docs/decisions/0060-live-send-job-index.md):
 * - `send_jobs_due` on (instance_id, status, run_at, seq) becomes partial, `WHERE status = 'pending' OR status =
 *   'sending'`: a job leaves it when it is sent, failed or canceled, so sending a message no longer moves its entry
 *   to a `sent` part that held every kept job, and the index's size follows the backlog, not the history. The
 *   claim, the next due time, the queue's sweep for due jobs and the reclaim of unconfirmed relays name their
 *   statuses as literals, which imply the predicate on SQLite and PostgreSQL.
 * - `send_jobs_new_chats` on (instance_id, sent_at) `WHERE status = 'sent' AND new_chat = 1`: the chat-opening
 *   relays the new-chats-per-day pace counts, which read the `sent` part of the old index.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('send_jobs_due').execute();
  await db.schema
    .createIndex('send_jobs_due')
    .on('send_jobs')
    .columns(['instance_id', 'status', 'run_at', 'seq'])
    .where(sql<boolean>`status = 'pending' or status = 'sending'`)
    .execute();
  await db.schema
    .createIndex('send_jobs_new_chats')
    .on('send_jobs')
    .columns(['instance_id', 'sent_at'])
    .where(sql<boolean>`status = 'sent' and new_chat = 1`)
    .execute();
}

/** Back to the full index of migration 0013. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('send_jobs_new_chats').execute();
  await db.schema.dropIndex('send_jobs_due').execute();
  await db.schema
    .createIndex('send_jobs_due')
    .on('send_jobs')
    .columns(['instance_id', 'status', 'run_at', 'seq'])
    .execute();
}
