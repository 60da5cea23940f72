import { type Insertable, type Kysely, type Selectable, sql } from 'kysely';
import { extended } from '../domain/objects.ts';
import type { SendJobStatus, SendMode } from '../domain/sends.ts';
import { lockedAccountGenerations } from './account-generations.ts';
import { compiledListStatement, isPostgres } from './compiled.ts';
import { runLast } from './last-statement.ts';
import { rowSetInsert } from './row-sets.ts';
import type { Database, SendJobsTable } from './schema.ts';

/**
 * Send jobs (migration 0013; docs/decisions/0009-sends-as-jobs.md): their rows, written, read, canceled, marked sent
 * and pruned. Times are epoch ms. The send queue's claim cycle over the live jobs (claim, hand back, finish, the
 * sweep's reads) is in `send-job-claims.ts`; the pace and pause stored beside them are in `send-pacing.ts`.
 */

/** A stored send job. */
export interface SendJob {
  instanceId: string;
  /** The platform message id of every relay attempt. */
  id: string;
  seq: number;
  chat: string;
  kind: string;
  /** The serialised `OutgoingMessage` (`src/sends/payload.ts`). */
  payload: string;
  mode: SendMode;
  status: SendJobStatus;
  /**
   * When the job may first go (epoch ms), and with `seq` its place in the instance's acceptance order: its `sendAt`,
   * else its acceptance; moved by a hold of the new-chats pace or the reach-out timelock
   * (docs/decisions/0013-pacing.md). A job waiting for a new-chat slot has `SLOT_WAIT` added
   * (src/store/send-job-slots.ts): no time makes it due until a freed slot releases it.
   */
  runAt: number;
  /**
   * When a job a failed relay put back may be tried again (epoch ms; 0: no wait). The instance's later jobs wait
   * behind it meanwhile (docs/decisions/0009-sends-as-jobs.md).
   */
  notBefore: number;
  sendAt: number | null;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  lockedBy: string | null;
  createdAt: number;
  /** When the row last changed (epoch ms). */
  updatedAt: number;
  sentAt: number | null;
  /**
   * When a logout found the job being relayed (epoch ms), or null: it is canceled rather than made `pending` again
   * (docs/decisions/0074-logout-cancels-pending-sends.md). On a `sent` job, when the account that relayed it logged
   * out: the new-chats count leaves it out (docs/decisions/0013-pacing.md).
   */
  loggedOutAt: number | null;
}

const STATUSES: readonly SendJobStatus[] = ['pending', 'sending', 'sent', 'failed', 'canceled'];

/** The live statuses as literals, for the `send_jobs_due` index (src/store/send-job-claims.ts says why). */
const PENDING = sql.lit<SendJobStatus>('pending');
const SENDING = sql.lit<SendJobStatus>('sending');

/** A stored row as a {@link SendJob} (times as epoch ms numbers; an unknown status reads as `failed`). */
export function toJob(row: Selectable<SendJobsTable>): SendJob {
  return {
    instanceId: row.instance_id,
    id: row.id,
    seq: Number(row.seq),
    chat: row.chat,
    kind: row.kind,
    payload: row.payload,
    mode: row.mode === 'async' ? 'async' : 'sync',
    status: STATUSES.find((s) => s === row.status) ?? 'failed',
    runAt: Number(row.run_at),
    notBefore: Number(row.not_before),
    sendAt: row.send_at === null ? null : Number(row.send_at),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lastError: row.last_error,
    lockedBy: row.locked_by,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    sentAt: row.sent_at === null ? null : Number(row.sent_at),
    loggedOutAt: row.logged_out_at === null ? null : Number(row.logged_out_at),
  };
}

/**
 * What {@link insertSendJob} stores: the job's fields of {@link SendJob} that exist before its first relay, `now`
 * (epoch ms) for its timestamps and, when set, `claimedBy`: the job is stored already claimed (`sending`, attempt 1).
 * `account`, when set, is the instance's account generation the send was accepted under (`instances.account_generation`,
 * src/store/account-generations.ts): {@link insertAcceptedSendJobs} and {@link storeSendJobOnce} store the job only
 * while the instance's row still holds it (docs/decisions/0074-logout-cancels-pending-sends.md). It is not stored.
 */
export type NewSendJob = Pick<
  SendJob,
  'instanceId' | 'id' | 'seq' | 'chat' | 'kind' | 'payload' | 'mode' | 'runAt' | 'sendAt' | 'maxAttempts'
> & { now: number; claimedBy?: string; account?: number };

/** The stored form of `job`, inserted already claimed by its `claimedBy` node (`sending`, attempt 1, never failed). */
export function claimedSendJob(job: NewSendJob & { claimedBy: string }): SendJob {
  return toJob(extended(newJobRow(job), { new_chat: 0, logged_out_at: null, not_before: 0 }));
}

/** Stores a new job (`pending`, or `sending` held by `claimedBy`). @throws on a duplicate id (a bug). */
export async function insertSendJob(db: Kysely<Database>, job: NewSendJob): Promise<void> {
  await insertSendJobs(db, [job]);
}

/**
 * Stores several new jobs in one statement (one transaction): the send queue's group insert of the jobs accepted
 * in the same turn of the event loop. @throws when any row fails (none is stored then).
 */
export async function insertSendJobs(db: Kysely<Database>, jobs: readonly NewSendJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const rows = jobs.map(newJobRow);
  if (isPostgres(db)) await db.executeQuery(SEND_JOB_ROWS.recordSetQuery(db, rows));
  else await INSERT_SEND_JOBS.run(db, {}, rows);
}

/**
 * Stores new jobs as {@link insertSendJobs} does, in one transaction, but only those whose instance's account
 * generation is still the one they were accepted under (`NewSendJob.account`; a job without one is stored as it is):
 * the generation is read in the same transaction (src/store/account-generations.ts `lockedAccountGenerations`), so a
 * logout whose cancel of the account's pending sends committed first refuses the job, and one committing after sees
 * it (docs/decisions/0074-logout-cancels-pending-sends.md). A refused job leaves the others of the group stored.
 * @returns the jobs refused (nothing of them stored). @throws when any row stored fails (none is stored then).
 */
export async function insertAcceptedSendJobs(
  db: Kysely<Database>,
  jobs: readonly NewSendJob[],
): Promise<ReadonlySet<NewSendJob>> {
  const checked = jobs.filter((job) => job.account !== undefined);
  if (checked.length === 0) {
    await insertSendJobs(db, jobs);
    return new Set();
  }
  return db.transaction().execute(async (trx) => {
    const generations = await lockedAccountGenerations(
      trx,
      checked.map((job) => job.instanceId),
    );
    const refused = new Set(checked.filter((job) => generations.get(job.instanceId) !== job.account));
    const kept = jobs.filter((job) => !refused.has(job));
    // On PostgreSQL the insert leaves with the commit (docs/decisions/0063-pipelined-commit.md): one round trip for
    // both, after the read's.
    if (kept.length > 0 && isPostgres(trx))
      await runLast(trx, SEND_JOB_ROWS.recordSetQuery(trx, kept.map(newJobRow)));
    else await insertSendJobs(trx, kept);
    return refused;
  });
}

/**
 * A synchronous job's failure once its wait is over (src/sends/sync-deadline.ts): from `at` (epoch ms) on, a
 * {@link storeSendJobOnce} writes the job failed unsent with `error` instead.
 */
export interface LateFailure {
  at: number;
  error: string;
}

/**
 * Stores a new job unless a row with its key is there already, in one transaction, for a write whose first try
 * ended with the outcome unknown (the connection lost between its commit and the answer,
 * docs/decisions/0011-store-faults.md): a row found belongs to this job when it was stored for the same send (same
 * `seq`, chat, kind, payload, mode and acceptance time, `now`). With `late` and the clock `now` (epoch ms) at or
 * past `late.at`, the job is written, or found unchanged and left, `failed` with `late.error` in the same
 * transaction; a found job is failed by a conditional write, so a relay's claim that commits between its read and
 * that write (PostgreSQL's reads take no lock) keeps the job, `moved`, and is never failed under the relay.
 * @returns `stored` when this call wrote the row; `found` when the earlier try had and the row is still as that try
 *   wrote it (`pending` with no attempt, or `sending` held by `claimedBy` with one); `moved` when it had and a relay
 *   changed the job since (claimed, handed back or ended, here or on another node); `failed` when it was late;
 *   `refused` when no try stored it and the instance's account generation is no longer `job.account` (a logout
 *   committed since the send was accepted: nothing stored, {@link insertAcceptedSendJobs}).
 * @throws Error when a different job holds the key (two sends with one message id: a bug); the store's error as
 *   it raised it.
 */
export async function storeSendJobOnce(
  db: Kysely<Database>,
  job: NewSendJob,
  now: number,
  late?: LateFailure,
): Promise<'stored' | 'found' | 'moved' | 'failed' | 'refused'> {
  const written = newJobRow(job);
  const fail = late !== undefined && now >= late.at;
  const failed = { status: 'failed', last_error: late?.error ?? null, locked_by: null, locked_at: null };
  return db.transaction().execute(async (trx) => {
    // Inserted only under the account it was accepted under (insertAcceptedSendJobs); a row found is looked at all
    // the same, since the first try may have stored it before a logout.
    const kept =
      job.account === undefined ||
      (await lockedAccountGenerations(trx, [job.instanceId])).get(job.instanceId) === job.account;
    if (kept) {
      const inserted = await trx
        .insertInto('send_jobs')
        .values(fail ? extended(written, failed) : written)
        .onConflict((conflict) => conflict.columns(['instance_id', 'id']).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return fail ? 'failed' : 'stored';
    }
    const row = await trx
      .selectFrom('send_jobs')
      .select(['seq', 'chat', 'kind', 'payload', 'mode', 'created_at', 'status', 'attempts', 'locked_by'])
      .where('instance_id', '=', job.instanceId)
      .where('id', '=', job.id)
      .executeTakeFirst();
    // Not stored by the first try, and the account changed since the send was accepted.
    if (row === undefined && !kept) return 'refused';
    const same =
      row !== undefined &&
      Number(row.seq) === job.seq &&
      row.chat === job.chat &&
      row.kind === job.kind &&
      row.payload === job.payload &&
      row.mode === job.mode &&
      Number(row.created_at) === job.now;
    if (!same)
      throw new Error(`send job ${job.id} of instance ${job.instanceId} is stored already for another send`);
    const unchanged =
      row.status === written.status &&
      Number(row.attempts) === written.attempts &&
      row.locked_by === written.locked_by;
    if (!unchanged) return 'moved';
    if (!fail) return 'found';
    // Only the row as it was read: on PostgreSQL the read takes no lock (nor does the insert that found the row), so
    // a relay's claim may commit in between; its job is that relay's then, never failed under it while it goes out.
    const updated = await trx
      .updateTable('send_jobs')
      .set(extended(failed, { updated_at: now }))
      .where('instance_id', '=', job.instanceId)
      .where('id', '=', job.id)
      .where('status', '=', written.status)
      .where('attempts', '=', written.attempts)
      .where((eb) =>
        written.locked_by === null ? eb('locked_by', 'is', null) : eb('locked_by', '=', written.locked_by),
      )
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) > 0 ? 'failed' : 'moved';
  });
}

/** The row a new job is stored as (`new_chat`, `logged_out_at` and `not_before` keep their defaults). */
function newJobRow(job: NewSendJob): NewJobRow {
  const claimed = job.claimedBy !== undefined;
  return {
    instance_id: job.instanceId,
    id: job.id,
    seq: job.seq,
    chat: job.chat,
    kind: job.kind,
    payload: job.payload,
    mode: job.mode,
    status: claimed ? 'sending' : 'pending',
    run_at: job.runAt,
    send_at: job.sendAt,
    attempts: claimed ? 1 : 0,
    max_attempts: job.maxAttempts,
    last_error: null,
    locked_by: job.claimedBy ?? null,
    locked_at: claimed ? job.now : null,
    created_at: job.now,
    updated_at: job.now,
    sent_at: null,
  };
}

/** A new job's row: every column but `new_chat`, `logged_out_at` and `not_before`, which keep their defaults. */
type NewJobRow = Omit<Selectable<SendJobsTable>, 'new_chat' | 'logged_out_at' | 'not_before'>;

/** The columns of {@link NewJobRow}, for the inserts below. */
const NEW_JOB_FIELDS = {
  instance_id: true,
  id: true,
  seq: true,
  chat: true,
  kind: true,
  payload: true,
  mode: true,
  status: true,
  run_at: true,
  send_at: true,
  attempts: true,
  max_attempts: true,
  last_error: true,
  locked_by: true,
  locked_at: true,
  created_at: true,
  updated_at: true,
  sent_at: true,
} as const satisfies { readonly [K in keyof NewJobRow]-?: true };

/**
 * Job rows in one statement on SQLite (compiled per list length up to 64 jobs, larger groups built at each call:
 * src/store/compiled.ts).
 */
const INSERT_SEND_JOBS = compiledListStatement<
  Record<never, never>,
  Omit<Insertable<SendJobsTable>, 'new_chat' | 'logged_out_at' | 'not_before'>
>(NEW_JOB_FIELDS, (db, _arg, rows) => db.insertInto('send_jobs').values(rows));

/**
 * Job rows in one statement on PostgreSQL, as one JSON array (docs/decisions/0083-row-set-inserts.md): one text
 * whatever the group's size, so each connection parses it once and keeps its plan, where a text per list length was
 * parsed and planned anew on most runs.
 */
const SEND_JOB_ROWS = rowSetInsert<'send_jobs', NewJobRow>('send_jobs', { fields: NEW_JOB_FIELDS });

/** Job `id` of an instance, or undefined. */
export async function findSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<SendJob | undefined> {
  const row = await db
    .selectFrom('send_jobs')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row ? toJob(row) : undefined;
}

/**
 * What a logout of the instance's account does to its jobs (src/sends/logout.ts,
 * docs/decisions/0074-logout-cancels-pending-sends.md), at `now` (epoch ms), in one statement: every `pending` job is
 * canceled, and every `sending` job is marked with `logged_out_at`, so that its relay, if it does not end it sent or
 * failed, cancels it rather than making it `pending` again (src/store/send-job-claims.ts). Returns the ids canceled,
 * in acceptance order. Finished jobs are left as they are.
 */
export async function cancelSendJobsOnLogout(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
): Promise<string[]> {
  const rows = await db
    .updateTable('send_jobs')
    .set({
      status: sql<string>`case when status = ${PENDING} then 'canceled' else status end`,
      logged_out_at: sql<number | null>`case when status = ${SENDING} then ${now} else logged_out_at end`,
      updated_at: now,
    })
    .where('instance_id', '=', instanceId)
    .where((eb) => eb.or([eb('status', '=', PENDING), eb('status', '=', SENDING)]))
    .returning(['id', 'seq', 'status'])
    .execute();
  return rows
    .filter((row) => row.status === 'canceled')
    .sort((a, b) => Number(a.seq) - Number(b.seq))
    .map((row) => row.id);
}

/**
 * Cancels job `id` when it is still `pending` (accepted or scheduled, not relayed). Returns the job as it is
 * afterwards (status `canceled` when this call canceled it), or undefined when there is no such job.
 */
export async function cancelSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  now: number,
): Promise<{ job: SendJob; canceled: boolean } | undefined> {
  const updated = await db
    .updateTable('send_jobs')
    .set({ status: 'canceled', updated_at: now })
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .returningAll()
    .executeTakeFirst();
  if (updated) return { job: toJob(updated), canceled: true };
  const job = await findSendJob(db, instanceId, id);
  return job ? { job, canceled: false } : undefined;
}

/** Flags job `id` as opening a chat (counted by the new-chats-per-day pace once sent). */
export async function markSendJobNewChat(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<void> {
  await db
    .updateTable('send_jobs')
    .set({ new_chat: 1 })
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .execute();
}

/**
 * Deletes up to `limit` finished jobs (`sent`, `failed`, `canceled`) last changed before `before` (epoch ms); pending
 * and in-flight jobs are never touched. → how many were deleted. Called by the log retention job
 * (src/webhooks/retention.ts) with the delivery log's retention, and never with less than a day, so the
 * new-chats-per-day pace (docs/decisions/0013-pacing.md) still counts the last day's sends.
 */
export async function pruneSendJobs(db: Kysely<Database>, before: number, limit: number): Promise<number> {
  const old = await db
    .selectFrom('send_jobs')
    .select(['instance_id', 'id'])
    .where('status', 'in', ['sent', 'failed', 'canceled'])
    .where('updated_at', '<', before)
    .limit(limit)
    .execute();
  const byInstance = new Map<string, string[]>();
  for (const row of old) {
    const ids = byInstance.get(row.instance_id) ?? [];
    ids.push(row.id);
    byInstance.set(row.instance_id, ids);
  }
  for (const [instanceId, ids] of byInstance) {
    await db
      .deleteFrom('send_jobs')
      .where('instance_id', '=', instanceId)
      .where('id', 'in', ids)
      .where('status', 'in', ['sent', 'failed', 'canceled'])
      .execute();
  }
  return old.length;
}
