import { CompiledQuery, type Kysely, sql } from 'kysely';
import type { SendMode } from '../domain/sends.ts';
import { compiledListStatement, isPostgres } from './compiled.ts';
import type { Database } from './schema.ts';

/** A job {@link markSendJobsSent} marked `sent`: its mode, and whether receipts were held for it. */
export interface MarkedJob {
  mode: SendMode;
  /**
   * Receipts naming the job came before its message was recorded and are held for it (src/store/held-receipts.ts,
   * docs/decisions/0104-receipts-before-their-send.md): to be taken and reported after its message.
   */
  held: boolean;
}

/**
 * Marks the jobs `ids` of an instance `sent` at `at` (epoch ms) when they are being relayed (status `sending`).
 * → each job marked, by id: its mode (`sync` or `async`) and whether receipts are held for it; ids with no such job
 * in `sending` (messages the account sent from elsewhere) are absent. The send queue's projection calls it in the
 * transaction that records the jobs' `message` events, so each outcome (and, for a queued send, its `MessageStatus`
 * event) commits with its message. The payload is dropped: the message row written in the same transaction holds the
 * content now. With `unlessHeld`, a job with held receipts is left `sending`, unmarked: a mark that no derived event
 * can follow (src/store/advance-marks.ts) leaves such a job to its relay's own finish, which reports them.
 */
export async function markSendJobsSent(
  db: Kysely<Database>,
  instanceId: string,
  ids: readonly string[],
  at: number,
  unlessHeld = false,
): Promise<Map<string, MarkedJob>> {
  const marked = new Map<string, MarkedJob>();
  if (ids.length === 0) return marked;
  const { rows } = isPostgres(db)
    ? await db.executeQuery<{ id: string; mode: string; held: boolean | number }>(
        CompiledQuery.raw(unlessHeld ? MARK_UNLESS_HELD_POSTGRES : MARK_SEND_JOBS_SENT_POSTGRES, [
          instanceId,
          at,
          ids,
        ]),
      )
    : await (unlessHeld ? MARK_UNLESS_HELD : MARK_SEND_JOBS_SENT).run(
        db,
        { instanceId, at },
        ids.map((id) => ({ id })),
      );
  for (const row of rows) {
    marked.set(row.id, { mode: row.mode === 'async' ? 'async' : 'sync', held: Boolean(Number(row.held)) });
  }
  return marked;
}

/**
 * The SQL, on either store, of whether receipts are held for the `send_jobs` row `table` names (`send_jobs`, or its
 * alias): one key lookup in `held_receipts`, nearly always empty.
 */
export function heldReceiptsOf(table: string): string {
  return `exists (select 1 from held_receipts h
    where h.instance_id = ${table}.instance_id and h.message_id = ${table}.id)`;
}

/**
 * The SQL, on either store, of a condition that no receipts are held for the `send_jobs` row `table` names:
 * {@link heldReceiptsOf} negated, its subquery fenced by an `offset` (PostgreSQL turns an `exists` with none into an
 * anti-join, which may read the table's index whole; SQLite takes an offset only after a limit), so that each job's
 * key is looked up in `held_receipts` (test/store/key-lookup-plans.test.ts).
 */
export function noHeldReceiptsOf(table: string): string {
  return `not exists (select 1 from held_receipts h
    where h.instance_id = ${table}.instance_id and h.message_id = ${table}.id limit 1 offset 0)`;
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
returning id, mode, ${heldReceiptsOf('send_jobs')} as held`;

/** {@link MARK_SEND_JOBS_SENT_POSTGRES} leaving the jobs with held receipts unmarked (`unlessHeld`). */
const MARK_UNLESS_HELD_POSTGRES = `update send_jobs ${markSentSetPostgres('$2::bigint')}
where instance_id = $1::varchar and id = any ($3::varchar[]) and status = 'sending'
  and ${noHeldReceiptsOf('send_jobs')}
returning id, mode, false as held`;

/** The update of {@link markSendJobsSent} on SQLite (compiled per number of jobs, src/store/compiled.ts). */
const MARK_SEND_JOBS_SENT = markStatementSqlite(false);

/** {@link MARK_SEND_JOBS_SENT} leaving the jobs with held receipts unmarked (`unlessHeld`). */
const MARK_UNLESS_HELD = markStatementSqlite(true);

/** The SQLite update of {@link markSendJobsSent}, with `unlessHeld` or without. */
function markStatementSqlite(unlessHeld: boolean) {
  return compiledListStatement<
    { instanceId: string; at: number },
    { id: string },
    { id: string; mode: string; held: number }
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
      .$if(unlessHeld, (qb) => qb.where(sql<boolean>`${sql.raw(noHeldReceiptsOf('send_jobs'))}`))
      .returning(['id', 'mode', sql<number>`${sql.raw(heldReceiptsOf('send_jobs'))}`.as('held')]),
  );
}
