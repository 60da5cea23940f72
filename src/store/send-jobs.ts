import type { Insertable, Selectable } from 'kysely';
import { type Kysely, sql } from 'kysely';
import type { SendJobStatus, SendMode } from '../domain/sends.ts';
import { compiledListStatement, compiledStatement } from './compiled.ts';
import type { Database, SendJobsTable } from './schema.ts';

/**
 * Send jobs (migration 0013; docs/decisions/0009-sends-as-jobs.md). One claim function takes an instance's next due
 * job for a node; a node changes only the jobs it holds. Times are epoch ms. The pace and pause stored beside them
 * are in `send-pacing.ts`.
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
  runAt: number;
  sendAt: number | null;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  lockedBy: string | null;
  createdAt: number;
  sentAt: number | null;
}

const STATUSES: readonly SendJobStatus[] = ['pending', 'sending', 'sent', 'failed', 'canceled'];

/**
 * `pending` and `sending` written into a statement's text, not bound: a statement must name the status as a literal
 * for SQLite and PostgreSQL to use the `send_jobs_due` index, which holds only jobs in these two states (migration
 * 0021, docs/decisions/0060-live-send-job-index.md); a bound parameter could be any status.
 */
const PENDING = sql.lit<SendJobStatus>('pending');
const SENDING = sql.lit<SendJobStatus>('sending');

function toJob(row: Selectable<SendJobsTable>): SendJob {
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
    sendAt: row.send_at === null ? null : Number(row.send_at),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lastError: row.last_error,
    lockedBy: row.locked_by,
    createdAt: Number(row.created_at),
    sentAt: row.sent_at === null ? null : Number(row.sent_at),
  };
}

/**
 * What {@link insertSendJob} stores: the job's fields of {@link SendJob} that exist before its first relay, `now`
 * (epoch ms) for its timestamps and, when set, `claimedBy`: the job is stored already claimed (`sending`, attempt 1).
 */
export type NewSendJob = Pick<
  SendJob,
  'instanceId' | 'id' | 'seq' | 'chat' | 'kind' | 'payload' | 'mode' | 'runAt' | 'sendAt' | 'maxAttempts'
> & { now: number; claimedBy?: string };

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
  await INSERT_SEND_JOBS.run(
    db,
    {},
    jobs.map((job) => {
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
    }),
  );
}

/**
 * Job rows in one statement (compiled per list length up to 64 jobs, larger groups built at each call:
 * src/store/compiled.ts); `new_chat` keeps its default.
 */
const INSERT_SEND_JOBS = compiledListStatement<
  Record<never, never>,
  Omit<Insertable<SendJobsTable>, 'new_chat'>
>(
  {
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
  },
  (db, _arg, rows) => db.insertInto('send_jobs').values(rows),
);

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
 * Claims the instance's next due job for node `nodeId`: the oldest `pending` job (by `run_at`, then `seq`) whose
 * `run_at` ≤ `now`, moved to `sending` with its attempt counted, in one statement. `only` limits the claim to jobs of one mode (while
 * the queue is paused, synchronous requests still go). Returns undefined when none is due.
 */
export async function claimNextSendJob(
  db: Kysely<Database>,
  instanceId: string,
  nodeId: string,
  now: number,
  only?: { mode: SendMode },
): Promise<SendJob | undefined> {
  const { rows } = only
    ? await CLAIM_NEXT_OF_MODE.run(db, { instanceId, nodeId, now, mode: only.mode })
    : await CLAIM_NEXT.run(db, { instanceId, nodeId, now });
  const claimed = rows[0];
  return claimed ? toJob(claimed) : undefined;
}

type ClaimArguments = { instanceId: string; nodeId: string; now: number; mode?: SendMode };

/**
 * The claim: one statement, the oldest due job picked and claimed together (the instance's holder is its only
 * claimer; the status check keeps a concurrent cancel from being overwritten).
 */
function claimStatement(ofMode: boolean) {
  return compiledStatement<ClaimArguments, Selectable<SendJobsTable>>((db, arg) => {
    let next = db
      .selectFrom('send_jobs')
      .select('id')
      .where('instance_id', '=', arg('instanceId'))
      .where('status', '=', PENDING)
      .where('run_at', '<=', arg('now'));
    if (ofMode) next = next.where('mode', '=', arg('mode') ?? 'sync');
    return db
      .updateTable('send_jobs')
      .set({
        status: 'sending',
        attempts: sql<number>`attempts + 1`,
        locked_by: arg('nodeId'),
        locked_at: arg('now'),
        updated_at: arg('now'),
      })
      .where('instance_id', '=', arg('instanceId'))
      .where('status', '=', PENDING)
      .where('id', '=', next.orderBy('run_at').orderBy('seq').limit(1))
      .returningAll();
  });
}

const CLAIM_NEXT = claimStatement(false);
const CLAIM_NEXT_OF_MODE = claimStatement(true);

/**
 * The instances with a live job (pending, or sending for a node that may have died) whose `run_at` (epoch ms) is at
 * or before `now`: the send queue's sweep wakes their queues. Reads only the live jobs' index (migration 0021).
 */
export async function instancesWithDueJobs(db: Kysely<Database>, now: number): Promise<string[]> {
  const rows = await db
    .selectFrom('send_jobs')
    .select('instance_id')
    .distinct()
    .where((eb) => eb.or([eb('status', '=', PENDING), eb('status', '=', SENDING)]))
    .where('run_at', '<=', now)
    .execute();
  return rows.map((row) => row.instance_id);
}

/** The earliest `run_at` of the instance's pending jobs (epoch ms), or undefined when none is pending. */
export async function nextPendingRunAt(
  db: Kysely<Database>,
  instanceId: string,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('send_jobs')
    .select((eb) => eb.fn.min('run_at').as('next'))
    .where('instance_id', '=', instanceId)
    .where('status', '=', PENDING)
    .executeTakeFirst();
  return row?.next === null || row?.next === undefined ? undefined : Number(row.next);
}

/**
 * Hands every `sending` job of the instance back to `pending`: their relay was never confirmed (the node that
 * held them died or lost the instance). Called by the instance's new holder before it claims; the next relay
 * reuses each job's id, so the recipient sees the message once. Returns how many were handed back.
 */
export async function reclaimSendingJobs(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
): Promise<number> {
  const result = await db
    .updateTable('send_jobs')
    .set({ status: 'pending', locked_by: null, locked_at: null, updated_at: now })
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENDING)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Ends job `id` held by `nodeId`: `sent` (with `sentAt` and whether it opened a chat), `failed` (with the error),
 * or back to `pending` at `runAt` (with the error that held it back). Returns false when the node no longer holds
 * the job (it was reclaimed or canceled meanwhile): a worker only changes its own locks.
 */
export async function finishSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  nodeId: string,
  outcome:
    | { status: 'sent'; at: number; newChat: boolean }
    | { status: 'failed'; at: number; error: string }
    | { status: 'pending'; at: number; runAt: number; error: string },
): Promise<boolean> {
  const base = { locked_by: null, locked_at: null, updated_at: outcome.at };
  const set =
    outcome.status === 'sent'
      ? { ...base, status: 'sent', sent_at: outcome.at, new_chat: outcome.newChat ? 1 : 0 }
      : outcome.status === 'failed'
        ? { ...base, status: 'failed', last_error: outcome.error }
        : { ...base, status: 'pending', run_at: outcome.runAt, last_error: outcome.error };
  const result = await db
    .updateTable('send_jobs')
    .set(set)
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .where('status', '=', 'sending')
    .where('locked_by', '=', nodeId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
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
  const { rows } = await MARK_SEND_JOBS_SENT.run(
    db,
    { instanceId, at },
    ids.map((id) => ({ id })),
  );
  for (const row of rows) marked.set(row.id, row.mode === 'async' ? 'async' : 'sync');
  return marked;
}

/** The update of {@link markSendJobsSent} (compiled per number of jobs, src/store/compiled.ts). */
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
