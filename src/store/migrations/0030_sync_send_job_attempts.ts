import { type Kysely, sql } from 'kysely';

/**
 * A synchronous send job's `max_attempts` becomes 3 (it was 1), for the live jobs already stored
 * (docs/decisions/0009-sends-as-jobs.md). A job whose relay was interrupted (its process died, its node lost the
 * instance) is handed back by the instance's next holder and relayed again under its id; the hand-back now fails a
 * job whose attempts, counted at each claim, reached its `max_attempts` (src/store/send-job-claims.ts
 * `reclaimSendingJobs`), so that a relay that kills its process does not run at every restart for ever. A
 * synchronous job accepted before this migration and still `pending` or `sending` would otherwise be failed at the
 * first hand-back instead of relayed again; new ones are stored with 3 (src/app/messaging.ts `SYNC_MAX_ATTEMPTS`).
 * Finished jobs keep what they had. The count is written here, not imported: a migration never changes once shipped.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`update send_jobs set max_attempts = 3 where mode = 'sync' and max_attempts < 3 and status in ('pending', 'sending')`.execute(
    db,
  );
}

/** Back to 1 for the live synchronous jobs (what an older version stores). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update send_jobs set max_attempts = 1 where mode = 'sync' and status in ('pending', 'sending')`.execute(
    db,
  );
}
