import { CompiledQuery, type Kysely } from 'kysely';
import type { SendMode } from '../domain/sends.ts';
import { compiledListStatement, isPostgres } from './compiled.ts';
import type { Database } from './schema.ts';

/**
 * Marks the jobs `ids` of an instance `sent` at `at` (epoch ms) when they are being relayed (status `sending`).
 * → the mode (`sync` or `async`) of each job marked, by id; ids with no such job in `sending` (messages the account
 * sent from elsewhere) are absent. The send queue's projection calls it in the transaction that records the jobs'
 * `message` events, so each outcome (and, for a queued send, its `MessageStatus` event) commits with its message.
 * The payload is dropped: the message row written in the same transaction holds the content now.
 */
export async function markSendJobsSent(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
  at: number,
): Promise<Map<string, SendMode>> {
  const marked = new Map<string, SendMode>();
  if (ids.length === 0) return marked;
  const { rows } = isPostgres(db)
    ? await db.executeQuery<{ id: string; mode: string }>(
        CompiledQuery.raw(MARK_SEND_JOBS_SENT_POSTGRES, [instanceId, at, ids]),
      )
    : await MARK_SEND_JOBS_SENT.run(
        db,
        { instanceId, at },
        ids.map((id) => ({ id })),
      );
  for (const row of rows) marked.set(row.id, row.mode === 'async' ? 'async' : 'sync');
  return marked;
}

/**
 * The `set` clause of a job's `sent` mark on PostgreSQL, `at` the SQL of its time (epoch ms): the status, the time
 * (`sent_at`, `updated_at`), the lease released and the payload dropped (the message row holds the content now).
 * Shared by {@link MARK_SEND_JOBS_SENT_POSTGRES} and the marks that ride on the sequence's advance
 * (src/store/advance-marks.ts), so every form of the mark writes the same columns.
 */
export function markSentSetPostgres(at: string): string {
  return `set status = 'sent', sent_at = ${at}, locked_by = null, locked_at = null, updated_at = ${at}, payload = ''`;
}

/**
 * The update of {@link markSendJobsSent} on PostgreSQL: the ids as one array, so one text whatever their number,
 * parsed once per connection and planned like any named statement (docs/decisions/0055-named-statements.md):
 * whichever plan it keeps reads the jobs by their key or the instance's jobs being sent through `send_jobs_due`, a
 * few rows either way. Parameters: $1 the instance, $2 the time (epoch ms), $3 the ids.
 */
const MARK_SEND_JOBS_SENT_POSTGRES = `update send_jobs ${markSentSetPostgres('$2::bigint')}
where instance_id = $1::varchar and id = any ($3::varchar[]) and status = 'sending'
returning id, mode`;

/** The update of {@link markSendJobsSent} on SQLite (compiled per number of jobs, src/store/compiled.ts). */
const MARK_SEND_JOBS_SENT = compiledListStatement<
  { instanceId: string; at: number },
  { id: string },
  { id: string; mode: string }
>({ id: true }, (db, arg, jobs) =>
  db
    .updateTable('send_jobs')
    .set({
      status: 'sent',
      sent_at: arg('at'),
      locked_by: null,
      locked_at: null,
      updated_at: arg('at'),
      payload: '',
    })
    .where('instance_id', '=', arg('instanceId'))
    .where(
      'id',
      'in',
      jobs.map((job) => job.id),
    )
    .where('status', '=', 'sending')
    .returning(['id', 'mode']),
);
