import { CompiledQuery, type Kysely } from 'kysely';
import type { AdvanceRow } from './instance-routing.ts';
import { KEY_LOOKUPS } from './pg-key-lookups.ts';
import type { Database } from './schema.ts';
import { markSendJobsSent, markSentSetPostgres, noHeldReceiptsOf } from './send-job-marks.ts';

/**
 * Sent marks that ride on the sequence's advance on PostgreSQL (docs/decisions/0087-sent-marks-with-the-advance.md).
 *
 * The send queue marks a batch's relayed jobs `sent` in the transaction that records their `message` events
 * (src/sends/sent-marks.ts). When every one of those jobs has a request waiting for its outcome, no `MessageStatus`
 * event follows from the mark whatever it answers, so the batch's events, and with them the count its sequence
 * advances by, are known without the mark's answer. The mark is then not a statement of its own: it is noted on the
 * transaction ({@link rideWithAdvance}), and the statement that advances the instance's sequence
 * (src/store/instance-routing.ts `routeAndAdvance`, src/store/shared-advances.ts for a turn's shared transaction)
 * takes it along ({@link takeRidingMarks}) and answers the jobs it marked: one round trip instead of two.
 *
 * A job with receipts held for it (src/store/held-receipts.ts, docs/decisions/0104-receipts-before-their-send.md) is
 * not marked there: its receipts are events to record after its message, which a mark made with the advance cannot
 * add. It stays `sending`, answered as not marked, and its relay finishes it in a transaction of its own with those
 * receipts (src/sends/finish.ts); when the relay's process stops before that finish, the next holder's hand-back
 * ends it `sent`, its message being recorded (src/store/send-job-claims.ts `reclaimSendingJobs`,
 * docs/decisions/0105-recorded-sends-end-sent-at-the-hand-back.md).
 */

/**
 * The end of every advance's upsert into `webhook_state` on PostgreSQL, after the rows it inserts (an instance id
 * and a count each): an existing state row has its sequence advanced by the count instead, and each row answers the
 * columns of `AdvanceRow` (src/store/instance-routing.ts) with its `instance_id`: the new last sequence, the
 * webhook's disabled state, the instance's routing version and its endpoints' digest
 * (docs/decisions/0065-routing-version.md).
 */
export const ADVANCE_UPSERT_POSTGRES = `on conflict (instance_id) do update set last_sequence = webhook_state.last_sequence + excluded.last_sequence
returning instance_id, last_sequence, disabled_at, disabled_reason,
  (select routing_version from instances where instances.id = webhook_state.instance_id) as routing_version,
  (select count(*) || ':' || coalesce(sum(routing_stamp), 0) from webhook_endpoints
    where webhook_endpoints.instance_id = webhook_state.instance_id) as endpoints_digest`;

/** The jobs of one instance's batch to mark `sent` with its sequence's advance. */
export interface RidingMarks {
  /** The instance the jobs are of. */
  readonly instanceId: string;
  /** The jobs' ids (the batch's own `message` ids; an id may repeat, as an echo does). */
  readonly ids: readonly string[];
  /** When they were sent, epoch ms: their `sent_at` and `updated_at`. */
  readonly at: number;
  /**
   * Given, inside the transaction and before anything else runs in it, the ids of the jobs the statement marked
   * (those that were `sending` with no receipts held; the others had been ended already, by another holder or a try
   * before, or are messages the account sent from elsewhere, or are left to their relay's finish).
   */
  readonly answer: (marked: ReadonlySet<string>) => void;
}

/** The marks each transaction (a part's view of one, src/store/recorder-turns.ts) carries to its advance. */
const riding = new WeakMap<Kysely<Database>, RidingMarks>();

/**
 * Notes `marks` on `trx` for its sequence's advance to make. A mark noted earlier on the same transaction and not
 * taken is replaced: a transaction carries one instance's batch at a time.
 */
export function rideWithAdvance(trx: Kysely<Database>, marks: RidingMarks): void {
  riding.set(trx, marks);
}

/**
 * The marks noted on `trx` for instance `instanceId`, taken (a second call finds none); undefined when there are
 * none, or they are another instance's (left noted).
 */
export function takeRidingMarks(trx: Kysely<Database>, instanceId: string): RidingMarks | undefined {
  const marks = riding.get(trx);
  if (marks === undefined || marks.instanceId !== instanceId) return undefined;
  riding.delete(trx);
  return marks;
}

/**
 * Makes the marks noted on `trx` for instance `instanceId` that no advance took (the batch advanced no sequence: its
 * events were not webhook events, or it ran without the outbox), in a statement of their own, and answers them.
 * Nothing when none are left.
 * @throws the store's error (the recorder's transaction then rolls back).
 */
export async function runRidingMarks(trx: Kysely<Database>, instanceId: string): Promise<void> {
  const marks = takeRidingMarks(trx, instanceId);
  if (marks === undefined) return;
  const marked = await markSendJobsSent(trx, instanceId, marks.ids, marks.at, true);
  marks.answer(new Set(marked.keys()));
}

/**
 * The sequence's advance of one instance with its batch's sent marks, on PostgreSQL: `ADVANCE` of
 * src/store/instance-routing.ts and the update of src/store/send-job-marks.ts as one statement, whose one row holds
 * the advance's columns (all null when the instance is gone: nothing advanced) and `marked`, the ids of the jobs
 * marked. Parameters: $1 the instance, $2 the count, $3 the time (epoch ms), $4 the job ids. A statement's
 * data-modifying `with` clauses run whether or not the rest reads them (PostgreSQL documentation, "WITH Queries",
 * 7.8.4), and the two touch different tables, so neither sees the other's change.
 */
export const ADVANCE_MARKING_POSTGRES = `with marked as (
  update send_jobs ${markSentSetPostgres('$3::bigint')}
  where instance_id = $1::varchar and id = any ($4::varchar[]) and status = 'sending'
    and ${noHeldReceiptsOf('send_jobs')}
  returning id
), advanced as (
  insert into webhook_state (instance_id, last_sequence)
  select id, $2::bigint from instances where id = $1::varchar
  ${ADVANCE_UPSERT_POSTGRES}
)
select advanced.*, array(select id from marked) as marked from (select 1) as one left join advanced on true`;

/**
 * `ADVANCE_MANY_POSTGRES` of src/store/shared-advances.ts with the sent marks of the parts that carry some, in one
 * statement: one row per instance of `$1`, in its order, holding the advance's columns (all null when the instance
 * is gone) and `marked`, the ids of that instance's jobs marked. Parameters: $1 the instances, $2 their counts, $3,
 * $4 and $5 the marks as three arrays of one entry a job (its instance, its id, its time in epoch ms). A
 * {@link KEY_LOOKUPS} statement (docs/decisions/0086-generic-key-lookup-plans.md): the jobs are found by their key,
 * one index lookup an entry, whatever the table held when the plan was made.
 */
export const ADVANCE_MANY_MARKING_POSTGRES = `${KEY_LOOKUPS} with marks as (
  select m.instance_id, m.id, m.at from unnest($3::varchar[], $4::varchar[], $5::bigint[]) as m(instance_id, id, at)
), marked as (
  update send_jobs s ${markSentSetPostgres('marks.at')}
  from marks
  where s.instance_id = any ($3::varchar[]) and s.id = any ($4::varchar[])
    and s.instance_id = marks.instance_id and s.id = marks.id and coalesce(s.status, '') = 'sending'
    and ${noHeldReceiptsOf('s')}
  returning s.instance_id, s.id
), advanced as (
  insert into webhook_state (instance_id, last_sequence)
  select u.id, u.n from unnest($1::varchar[], $2::bigint[]) as u(id, n)
  where exists (select 1 from instances i where i.id = any ($1::varchar[]) and i.id = u.id)
  order by u.id
  ${ADVANCE_UPSERT_POSTGRES}
)
select p.id as part_instance_id, advanced.*,
  array(select marked.id from marked where marked.instance_id = p.id) as marked
from unnest($1::varchar[]) with ordinality as p(id, place)
left join advanced on advanced.instance_id = p.id
order by p.place`;

/** An advance's columns as the marking statements answer them: each null when the instance is gone. */
export type NullableAdvance = { [K in keyof AdvanceRow]: AdvanceRow[K] | null };

/**
 * The advance of a marking statement's row, undefined when the instance was gone (its columns null: no number taken).
 */
export function advanceOf(row: NullableAdvance): AdvanceRow | undefined {
  const { last_sequence, disabled_at, disabled_reason, routing_version, endpoints_digest } = row;
  if (last_sequence === null || routing_version === null || endpoints_digest === null) return undefined;
  return { last_sequence, disabled_at, disabled_reason, routing_version, endpoints_digest };
}

/**
 * Runs {@link ADVANCE_MARKING_POSTGRES} in `trx` and answers `marks` with the jobs it marked. → the advance, undefined
 * when the instance is gone. @throws the store's error.
 */
export async function advanceMarking(
  trx: Kysely<Database>,
  id: string,
  count: number,
  marks: RidingMarks,
): Promise<AdvanceRow | undefined> {
  const { rows } = await trx.executeQuery<NullableAdvance & { marked: string[] }>(
    CompiledQuery.raw(ADVANCE_MARKING_POSTGRES, [id, count, marks.at, [...new Set(marks.ids)]]),
  );
  const [row] = rows;
  if (row === undefined) throw new Error('the advance with its sent marks answered no row');
  marks.answer(new Set(row.marked));
  return advanceOf(row);
}
