import type { Kysely } from 'kysely';

/**
 * `send_jobs.not_before` (bigint, epoch ms, not null, 0 by default): when a job a failed relay put back may be
 * tried again (docs/decisions/0009-sends-as-jobs.md). Before it, that retry time was written over `run_at`, which
 * is also the job's place in the instance's acceptance order (`run_at`, then `seq`): the jobs accepted after a job
 * whose relay failed (a dropped connection, the platform's rate-overlimit) kept their earlier `run_at` and were
 * claimed before it. Now `run_at` keeps the place and `not_before` the wait: the claim takes the instance's first
 * pending job in that order only once its `not_before` has passed, so the jobs after it wait behind it
 * (docs/decisions/0013-pacing.md). Rows stored before it read 0: no wait. The `send_jobs_due` index is unchanged:
 * the claim reads the first job through it and tests the column on that one row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('send_jobs')
    .addColumn('not_before', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}

/** Drops the column. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_jobs').dropColumn('not_before').execute();
}
