import { type Kysely, type Selectable, sql } from 'kysely';
import { extended } from '../domain/objects.ts';
import type { SendJobStatus, SendMode } from '../domain/sends.ts';
import { compiledStatement } from './compiled.ts';
import type { Database, SendJobsTable } from './schema.ts';
import { heldReceiptsOf } from './send-job-marks.ts';
import { SLOT_WAIT } from './send-job-slots.ts';
import { type SendJob, toJob } from './send-jobs.ts';

/**
 * The send queue's claim cycle over an instance's live send jobs (migration 0013, index 0021;
 * docs/decisions/0009-sends-as-jobs.md, docs/decisions/0060-live-send-job-index.md), on Graphile Worker's model: one
 * claim function takes the instance's next due job for a node and counts its attempt, a node finishes only the jobs
 * it holds, a new holder hands back the jobs a dead one held (failing those whose attempts reached `max_attempts`,
 * so a job is never claimed past them), and the sweep reads which instances have due jobs. Times are epoch ms.
 */

/**
 * `pending` and `sending` written into a statement's text, not bound: a statement must name the status as a literal
 * for SQLite and PostgreSQL to use the `send_jobs_due` index, which holds only jobs in these two states (migration
 * 0021, docs/decisions/0060-live-send-job-index.md); a bound parameter could be any status.
 */
const PENDING = sql.lit<SendJobStatus>('pending');
const SENDING = sql.lit<SendJobStatus>('sending');

/**
 * Claims the instance's next due job for node `nodeId`: the first `pending` job in acceptance order (by `run_at`, then
 * `seq`) whose `run_at` ≤ `now`, moved to `sending` with its attempt counted, in one statement. When that job is one
 * a failed relay put back and its `not_before` (epoch ms) is still ahead, nothing is claimed: the jobs accepted after
 * it wait behind it until its retry, so the instance's sends go out in acceptance order
 * (docs/decisions/0009-sends-as-jobs.md, docs/decisions/0013-pacing.md; {@link firstPendingJob} says when to look
 * again). `only` limits the claim to jobs of one mode (while the queue is paused, synchronous requests still go).
 * Returns undefined when none is due.
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
 * The claim: one statement, the first due job picked and claimed together (the instance's holder is its only
 * claimer; the status check keeps a concurrent cancel from being overwritten). The pick reads `send_jobs_due` in its
 * order; the wait for a retry (`not_before`) is tested on the picked row only, so a job waiting for its retry is never
 * passed by the next one.
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
      .where('not_before', '<=', arg('now'))
      .returningAll();
  });
}

const CLAIM_NEXT = claimStatement(false);
const CLAIM_NEXT_OF_MODE = claimStatement(true);

/**
 * The instances with a live job (pending, or sending for a node that may have died) whose `run_at` (epoch ms) is at
 * or before `now`: the send queue's sweep wakes their queues. Reads only the live jobs' index (migration 0021). A job
 * waiting for its retry (`not_before`) counts too; its holder's queue has a wake set for it, which the sweep leaves.
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

/**
 * How many of the instance's live jobs (pending, or sending: being relayed, or left unconfirmed for the next login's
 * hand-back) are due at `now` (epoch ms: `run_at` at or before it): the sends accepted whose time has come and that
 * have not gone out (docs/decisions/0016-session-lifecycle.md: the status shows them while they wait, for a stopped
 * session). Scheduled jobs not yet due are not counted. Reads only the live jobs' index (migration 0021).
 */
export async function countDueSendJobs(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
): Promise<number> {
  const { rows } = await COUNT_DUE.run(db, { instanceId, now });
  return Number(rows[0]?.due ?? 0);
}

/**
 * {@link countDueSendJobs}'s statement, compiled once per store: the session status runs it on every read, where
 * building it through Kysely cost more than running it (docs/benchmarks.md, step 125).
 */
const COUNT_DUE = compiledStatement<{ instanceId: string; now: number }, { due: number | string }>(
  (db, arg) =>
    db
      .selectFrom('send_jobs')
      .select((eb) => eb.fn.countAll<number | string>().as('due'))
      .where('instance_id', '=', arg('instanceId'))
      .where((eb) => eb.or([eb('status', '=', PENDING), eb('status', '=', SENDING)]))
      .where('run_at', '<=', arg('now')),
);

/**
 * The instance's first pending job in acceptance order (by `run_at`, then `seq`), or undefined when none is pending:
 * its `runAt` and its `notBefore` (epoch ms). The next claim can take a job at the later of the two and no sooner
 * ({@link claimNextSendJob}): every other pending job comes after this one. Jobs waiting for a new-chat slot are not
 * looked at (src/store/send-job-slots.ts: no time makes them due, a freed slot releases them). Reads `send_jobs_due`
 * in its order.
 */
export async function firstPendingJob(
  db: Kysely<Database>,
  instanceId: string,
): Promise<{ runAt: number; notBefore: number } | undefined> {
  const row = await db
    .selectFrom('send_jobs')
    .select(['run_at', 'not_before'])
    .where('instance_id', '=', instanceId)
    .where('status', '=', PENDING)
    .where('run_at', '<', SLOT_WAIT)
    .orderBy('run_at')
    .orderBy('seq')
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? undefined : { runAt: Number(row.run_at), notBefore: Number(row.not_before) };
}

/**
 * A job's status when its relay holds it back to `pending` ({@link holdBackSendJob}): `canceled` instead when a
 * logout found it being relayed (`logged_out_at` set, migration 0024; docs/decisions/0074-logout-cancels-pending-sends.md).
 * Written in the same statement as the hold, so a logout committing just before it is seen (on PostgreSQL the
 * statement waits for the logout's row lock and reads the row as the logout left it); the hand-back's
 * {@link HANDED_BACK_STATUS} reads it the same way.
 */
const PENDING_UNLESS_LOGGED_OUT = sql<SendJobStatus>`case when logged_out_at is null then ${PENDING} else 'canceled' end`;

/**
 * The `last_error` of a job failed at a hand-back ({@link reclaimSendingJobs}): every relay it was allowed was
 * interrupted (its process died, or its node lost the instance, before the outcome was stored), so its relay is not
 * tried again (docs/decisions/0009-sends-as-jobs.md). Any of those relays may have reached the platform.
 */
export const RELAY_ATTEMPTS_INTERRUPTED =
  'not relayed again: its relay was interrupted (the process relaying it stopped, or the platform never ' +
  'acknowledged it, before its outcome was stored) and it has no attempt left; such a relay may have reached the ' +
  'recipient';

/**
 * SQL of whether the `send_jobs` row's message is recorded: a row of `messages` under its key (the instance and the
 * job's id, which is the platform message id; one key lookup). The recorder writes it in the transaction that
 * records the job's own `message` event, so a job found `sending` with its message recorded went out: its relay
 * recorded it and its process stopped before the job was finished (a mark that rode on the sequence's advance leaves
 * a job with held receipts `sending` for its relay to finish, src/store/advance-marks.ts). Message rows are never
 * deleted (a deletion for everyone keeps the row).
 */
const MESSAGE_RECORDED = sql<boolean>`exists (select 1 from messages m
  where m.instance_id = send_jobs.instance_id and m.id = send_jobs.id)`;

/**
 * A handed-back job's status: `sent` when its message is recorded ({@link MESSAGE_RECORDED}: it went out, and is
 * never relayed again, docs/decisions/0105-recorded-sends-end-sent-at-the-hand-back.md); else `canceled` when a
 * logout found it being relayed (`logged_out_at` set, migration 0024;
 * docs/decisions/0074-logout-cancels-pending-sends.md), else `pending` while it has an attempt left (`attempts`
 * below `max_attempts`), else `failed`: the claim of its interrupted relay counted its last attempt, and a job whose
 * attempts reached `max_attempts` is not claimed again (Graphile Worker's rule; docs/decisions/0009-sends-as-jobs.md),
 * so a relay that kills its process (a poison message) does not run at every restart for ever.
 */
const HANDED_BACK_STATUS = sql<SendJobStatus>`case when ${MESSAGE_RECORDED} then 'sent'
  when logged_out_at is not null then 'canceled' when attempts < max_attempts then ${PENDING} else 'failed' end`;

/** A handed-back job's `last_error`: {@link RELAY_ATTEMPTS_INTERRUPTED} when it is failed, else as it was. */
const HANDED_BACK_ERROR = sql<string | null>`case
  when logged_out_at is null and attempts >= max_attempts and not ${MESSAGE_RECORDED} then ${RELAY_ATTEMPTS_INTERRUPTED}
  else last_error end`;

/**
 * A handed-back job's `sent_at` (epoch ms): for one whose message is recorded, when the message row was written (the
 * time its `sent` mark would have written); null otherwise, as for any job not sent.
 */
const HANDED_BACK_SENT_AT = sql<number | null>`(select m.created_at from messages m
  where m.instance_id = send_jobs.instance_id and m.id = send_jobs.id)`;

/** A handed-back job's payload: dropped for one whose message is recorded (the message row holds the content). */
const HANDED_BACK_PAYLOAD = sql<string>`case when ${MESSAGE_RECORDED} then '' else payload end`;

/**
 * What {@link reclaimSendingJobs} did: how many jobs it made `pending`, the ids it canceled and the ids it failed,
 * each in acceptance order, and the jobs it ended `sent`.
 */
export interface Reclaimed {
  handed: number;
  canceled: string[];
  /** Jobs with no attempt left, failed with {@link RELAY_ATTEMPTS_INTERRUPTED} instead of handed back. */
  failed: string[];
  /**
   * Jobs whose message is recorded, ended `sent` instead of handed back, in acceptance order: each id with its
   * `sent_at` (epoch ms, when its message row was written).
   */
  sent: { id: string; at: number }[];
}

/**
 * Hands every `sending` job of the instance back to `pending`, except the ids in `keep`: their relay was never
 * confirmed (the node that held them died or lost the instance). Called by the instance's new holder before it
 * claims, with the jobs whose relay it is still running as `keep`: handing one of those back would relay it a second
 * time while the first runs (a first relay the platform refuses, a second it takes, and the request answered with
 * the refusal). The next relay reuses each job's id, so the recipient sees the message once. A job whose message is
 * recorded (its relay went out and was recorded, and its process stopped before the job was finished) is ended
 * `sent` instead, never relayed again (docs/decisions/0105-recorded-sends-end-sent-at-the-hand-back.md); a job a
 * logout found being relayed is canceled instead; one whose attempts (counted at each claim, the interrupted one
 * included) reached its `max_attempts` is failed instead, with {@link RELAY_ATTEMPTS_INTERRUPTED} as its
 * `last_error` ({@link HANDED_BACK_STATUS}; docs/decisions/0009-sends-as-jobs.md). `now` is epoch ms.
 */
export async function reclaimSendingJobs(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
  keep: readonly string[] = [],
): Promise<Reclaimed> {
  const rows = await db
    .updateTable('send_jobs')
    .set({
      status: HANDED_BACK_STATUS,
      last_error: HANDED_BACK_ERROR,
      sent_at: HANDED_BACK_SENT_AT,
      payload: HANDED_BACK_PAYLOAD,
      locked_by: null,
      locked_at: null,
      updated_at: now,
    })
    .where('instance_id', '=', instanceId)
    .where('status', '=', SENDING)
    .$if(keep.length > 0, (qb) => qb.where('id', 'not in', keep))
    .returning(['id', 'seq', 'status', 'sent_at'])
    .execute();
  const inOrder = rows.sort((a, b) => Number(a.seq) - Number(b.seq));
  const ended = (status: SendJobStatus) =>
    inOrder.filter((row) => row.status === status).map((row) => row.id);
  const canceled = ended('canceled');
  const failed = ended('failed');
  const sent = inOrder
    .filter((row) => row.status === 'sent')
    .map((row) => ({ id: row.id, at: Number(row.sent_at ?? now) }));
  return { handed: rows.length - canceled.length - failed.length - sent.length, canceled, failed, sent };
}

/** A job {@link finishSendJob} ended. */
export interface FinishedJob {
  /**
   * Receipts naming the job came before any message of it was recorded and are held for it
   * (src/store/held-receipts.ts, docs/decisions/0104-receipts-before-their-send.md): the caller takes and reports them.
   */
  held: boolean;
}

/**
 * Ends job `id` held by `nodeId`: `sent` (with `sentAt` and whether it opened a chat) or `failed` (with the error).
 * Returns undefined when the node no longer holds the job (it was reclaimed or canceled meanwhile): a worker only
 * changes its own locks.
 */
export async function finishSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  nodeId: string,
  outcome: { status: 'sent'; at: number; newChat: boolean } | { status: 'failed'; at: number; error: string },
): Promise<FinishedJob | undefined> {
  const base = { locked_by: null, locked_at: null, updated_at: outcome.at };
  const set =
    outcome.status === 'sent'
      ? extended(base, { status: 'sent', sent_at: outcome.at, new_chat: outcome.newChat ? 1 : 0 })
      : extended(base, { status: 'failed', last_error: outcome.error });
  const result = await db
    .updateTable('send_jobs')
    .set(set)
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .where('status', '=', 'sending')
    .where('locked_by', '=', nodeId)
    .returning(sql<boolean | number>`${sql.raw(heldReceiptsOf('send_jobs'))}`.as('held'))
    .executeTakeFirst();
  return result === undefined ? undefined : { held: Boolean(Number(result.held)) };
}

/**
 * How a claimed job is put back to `pending` ({@link holdBackSendJob}; docs/decisions/0009-sends-as-jobs.md,
 * docs/decisions/0013-pacing.md). Times are epoch ms.
 */
export interface SendJobHold {
  /** When the hold is written (`updated_at`). */
  at: number;
  /** Until when the job waits. */
  until: number;
  /** The error that held it back, kept as its `last_error`. */
  error: string;
  /**
   * `in-place`: the job keeps its place in acceptance order (`run_at`) and waits there until `until` (`not_before`),
   * the instance's later jobs behind it: a failed relay tried again (a dropped connection, the platform's
   * rate-overlimit). `moved`: its `run_at` moves to `until`, so the instance's later jobs go on meanwhile: a send that
   * opens a chat held by the reach-out timelock, while sends to known chats go on. `for-slot`: moved the same way,
   * to wait for a new-chat slot of the new-chats-per-day pace at place `until` among the sends waiting for one, out
   * of the due range until a freed slot releases it (`run_at` = `until` + {@link SLOT_WAIT},
   * src/store/send-job-slots.ts).
   */
  waits: 'in-place' | 'moved' | 'for-slot';
  /**
   * True when the job did not reach the platform in this claim (held by the pace or a timelock in force before its
   * relay): the attempt its claim counted is given back, so `attempts` counts relays only. False after a relay.
   */
  unrelayed: boolean;
}

/**
 * Puts job `id` held by `nodeId` back to `pending` as `hold` says, with the error that held it back. A job a logout
 * found being relayed is canceled instead ({@link PENDING_UNLESS_LOGGED_OUT}), the error kept as its last.
 * @returns the status written (`pending` or `canceled`), or undefined when the node no longer holds the job.
 */
export async function holdBackSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  nodeId: string,
  hold: SendJobHold,
): Promise<'pending' | 'canceled' | undefined> {
  const wait =
    hold.waits === 'in-place'
      ? { not_before: hold.until }
      : hold.waits === 'moved'
        ? { run_at: hold.until }
        : { run_at: hold.until + SLOT_WAIT };
  const set = extended(wait, {
    locked_by: null,
    locked_at: null,
    updated_at: hold.at,
    status: PENDING_UNLESS_LOGGED_OUT,
    last_error: hold.error,
  });
  const row = await db
    .updateTable('send_jobs')
    .set(hold.unrelayed ? extended(set, { attempts: sql<number>`attempts - 1` }) : set)
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .where('status', '=', 'sending')
    .where('locked_by', '=', nodeId)
    .returning('status')
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return row.status === 'canceled' ? 'canceled' : 'pending';
}

/**
 * Fails synchronous job `id` while it is still `pending` and was never claimed (no attempt): a send whose request
 * stopped waiting for it (src/sends/sync-deadline.ts, docs/decisions/0009-sends-as-jobs.md), so it never goes out
 * after its request answered. Returns false otherwise (a relay claimed it, perhaps handed back since, or it ended):
 * a relay decides its outcome then, since one may already have reached the platform.
 */
export async function failPendingSendJob(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  now: number,
  error: string,
): Promise<boolean> {
  const result = await db
    .updateTable('send_jobs')
    .set({ status: 'failed', last_error: error, updated_at: now })
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .where('status', '=', PENDING)
    .where('mode', '=', 'sync')
    .where('attempts', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
