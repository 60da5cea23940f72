import { CompiledQuery, type Kysely } from 'kysely';
import type { FinishInput, FinishResult } from './delivery-finish.ts';
import type { NextAttempt } from './delivery-next.ts';
import { KEY_LOOKUPS } from './pg-key-lookups.ts';
import type { Database } from './schema.ts';
import { toMs } from './times.ts';

/**
 * The `started` and `opened` clauses of a group statement: the next deliveries of the rows of `chain` for which
 * `condition` holds, found by their key, have their attempt counted and their attempt row written (`$1` the time,
 * `$2` the worker).
 */
function startChosen(condition: string): string {
  return `started as (
  update webhook_deliveries d set attempts = d.attempts + 1
  from chain c join input i on i.ord = c.ord
  where ${condition} and d.event_id = i.next_event_id and coalesce(d.endpoint_id = i.next_endpoint_id, false)
    and d.event_id = any (array(select next_event_id from input))
  returning i.ord
), opened as (
  insert into webhook_attempts (id, event_id, endpoint_id, number, url, worker, attempted_at, finished_at,
    status_code, duration_ms, error, response_body, response_truncated)
  select i.next_attempt_id, i.next_event_id, i.next_endpoint_id, i.next_number, i.next_url, $2::varchar,
    $1::bigint, null, null, null, null, null, 0
  from started s join input i on i.ord = s.ord
  returning id
)`;
}

/**
 * The lane of delivery row `d` still has the settings its batch was claimed with, given as `i.next_url`,
 * `i.next_url_sealed`, `i.next_hmac_key` and `i.next_secret` (see `NextAttempt` in src/store/delivery-next.ts): the
 * default webhook's URL and HMAC key and the webhook not disabled, or the endpoint's URL and secret and the endpoint
 * enabled.
 */
const LANE_UNCHANGED = `(
      (d.endpoint_id = '' and exists (
          select 1 from instances s where s.id = d.instance_id and s.webhook_url = i.next_url
            and coalesce(s.hmac_key, '') = i.next_hmac_key)
        and not exists (
          select 1 from webhook_state w where w.instance_id = d.instance_id and w.disabled_at is not null))
      or exists (
        select 1 from webhook_endpoints e where e.id = d.endpoint_id and e.instance_id = d.instance_id
          and e.enabled = 1 and e.url = i.next_url and coalesce(e.url_sealed, '') = i.next_url_sealed
          and e.secret = i.next_secret)
    )`;

/**
 * The `startable` clause of a group statement: the rows of `input` whose next delivery may be started (still this
 * worker's claim at its `locked_at`, pending, its lane unchanged), read `for update` (`$2` the worker). The delivery is
 * found by its key, bounded by the input's next event ids; the other conditions are under `coalesce`, which no index
 * serves ({@link KEY_LOOKUPS}).
 */
const STARTABLE_NEXT = `startable as (
  select i.ord
  from input i join webhook_deliveries d on d.event_id = i.next_event_id
  where d.event_id = any (array(select next_event_id from input))
    and coalesce(d.endpoint_id = i.next_endpoint_id and d.locked_by = $2::varchar
      and d.locked_at = i.next_locked_at and d.status = 'pending'
    and ${LANE_UNCHANGED}, false)
  for update of d
)`;

/**
 * Groups of delivered records on PostgreSQL as one statement (docs/decisions/0059-lane-record-groups.md,
 * docs/decisions/0081-record-statements-across-lanes.md): the writes of `deliveredInOneStatement`
 * (src/store/delivery-next.ts) for every record, with the start rule of a lane expressed in SQL. The records may
 * belong to several lanes (`lane`, a number per lane in the statement); the rule holds within each lane. Each
 * record's attempt row is completed while it is open (one a takeover marked abandoned stays so,
 * docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md) and its delivery marked delivered while it is still
 * this worker's claim; the record's next delivery is started only when every record of its lane before it that takes
 * part in the lane's start order (`takes`) was applied and started its own, and when the next delivery is still this
 * claim's, pending, and its lane unchanged. The next deliveries that may be started are locked as they are
 * read (`for update`), so a row changed by another transaction meanwhile is read again before the decision.
 * Parameters: $1 the time (epoch ms), $2 the worker, then one array per column of `input`, in its order. Run as a
 * {@link KEY_LOOKUPS} statement (docs/decisions/0086-generic-key-lookup-plans.md): parsed and planned once per
 * connection, each attempt and delivery found by its primary key, every table joined to `input` also restricted to
 * the input's keys by `= any`, and the conditions besides a key's leading column under `coalesce`, so that no other
 * index can serve them.
 */
const DELIVERED_GROUP_POSTGRES = `${KEY_LOOKUPS} with input as (
  select * from unnest($3::varchar[], $4::integer[], $5::integer[], $6::text[], $7::integer[], $8::varchar[],
    $9::varchar[], $10::bigint[], $11::boolean[], $12::varchar[], $13::varchar[], $14::bigint[], $15::varchar[],
    $16::integer[], $17::text[], $18::text[], $19::text[], $20::text[], $21::integer[])
    with ordinality as t(attempt_id, status_code, duration_ms, response_body, response_truncated, event_id,
      endpoint_id, locked_at, takes, next_event_id, next_endpoint_id, next_locked_at, next_attempt_id,
      next_number, next_url, next_url_sealed, next_hmac_key, next_secret, lane, ord)
), completed as (
  update webhook_attempts a set finished_at = $1::bigint, status_code = i.status_code, duration_ms = i.duration_ms,
    error = null, response_body = i.response_body, response_truncated = i.response_truncated
  from input i
  where a.id = i.attempt_id and a.id = any (array(select attempt_id from input))
    and coalesce(a.worker = $2::varchar and a.finished_at is null, false)
  returning a.id
), delivered as (
  update webhook_deliveries d set status = 'delivered', delivered_at = $1::bigint, locked_by = null,
    locked_at = null, last_status = i.status_code, last_error = null, updated_at = $1::bigint
  from input i
  where d.event_id = i.event_id and coalesce(d.endpoint_id = i.endpoint_id, false)
    and d.event_id = any (array(select event_id from input))
    and coalesce(d.locked_by = $2::varchar and d.locked_at = i.locked_at and d.status = 'pending', false)
  returning i.ord
), ${STARTABLE_NEXT}, chain as (
  select i.ord, i.takes and i.next_event_id is not null and bool_and(
      not i.takes or (i.next_event_id is not null and x.ord is not null and s.ord is not null)
    ) over (partition by i.lane order by i.ord) as start
  from input i left join delivered x on x.ord = i.ord left join startable s on s.ord = i.ord
), ${startChosen('c.start')}
select i.ord,
  exists (select 1 from delivered x where x.ord = i.ord) as applied,
  exists (select 1 from started s where s.ord = i.ord) as started
from input i
order by i.ord`;

/**
 * The arrays of the `next_*` columns both statements take, in their order (event id, endpoint id, `locked_at`,
 * attempt id and number, URL, sealed URL, sealed HMAC key, sealed endpoint secret); null where a record has none.
 */
function nextColumns(nexts: readonly (NextAttempt | undefined)[]): unknown[][] {
  const column = <T>(pick: (next: NextAttempt) => T): (T | null)[] =>
    nexts.map((next) => (next === undefined ? null : pick(next)));
  return [
    column((n) => n.eventId),
    column((n) => n.endpointId),
    column((n) => n.lockedAt),
    column((n) => n.attemptId),
    column((n) => n.attemptNumber),
    column((n) => n.url),
    column((n) => n.urlSealed),
    column((n) => n.hmacKeySealed),
    column((n) => n.endpointSecretSealed),
  ];
}

/**
 * One record of a group: a delivered attempt's {@link FinishInput}, whether it takes part in its lane's start order,
 * and which lane of the statement it belongs to.
 */
export interface GroupRecord {
  input: FinishInput;
  /**
   * The record's lane among the statement's (any integer; default 0): the start order runs through the records of
   * one lane, in the order given, and never from one lane to another.
   */
  lane?: number;
  /**
   * The record took a delivery to start (its lane's start order runs through it). A record that took one but may
   * not start it (`input.next` absent) ends the group's starts; one that took none leaves them as they are.
   */
  takes: boolean;
}

/**
 * The statement {@link deliveredGroupInOneStatement} runs for `records` (at least one): {@link DELIVERED_GROUP_POSTGRES}
 * and its parameters. Exported for the plan tests (test/store/key-lookup-plans.test.ts).
 * @throws RangeError when `records` is empty, a record is not delivered, is a check-only try or differs in worker or
 *   time.
 */
export function deliveredGroupQuery(
  records: readonly GroupRecord[],
): CompiledQuery<{ ord: string | number; applied: boolean; started: boolean }> {
  const [first] = records;
  if (first === undefined) throw new RangeError('a group statement needs at least one record');
  const { workerId } = first.input;
  const now = toMs(first.input.now);
  for (const { input } of records) {
    if (input.outcome.kind !== 'delivered' || input.nextCheckOnly === true)
      throw new RangeError('a group statement records delivered attempts only, never a check');
    if (input.workerId !== workerId || toMs(input.now) !== now)
      throw new RangeError('a group statement records one worker at one time');
  }
  const column = <T>(pick: (record: GroupRecord) => T): T[] => records.map(pick);
  return CompiledQuery.raw(DELIVERED_GROUP_POSTGRES, [
    now,
    workerId,
    column((r) => r.input.attemptId),
    column((r) => r.input.attempt.statusCode),
    column((r) => r.input.attempt.durationMs),
    column((r) => r.input.attempt.responseBody),
    column((r) => (r.input.attempt.responseTruncated ? 1 : 0)),
    column((r) => r.input.eventId),
    column((r) => r.input.endpointId ?? ''),
    column((r) => r.input.lockedAt),
    column((r) => r.takes),
    ...nextColumns(column((r) => r.input.next)),
    column((r) => r.lane ?? 0),
  ]);
}

/**
 * Writes groups of delivered records in one statement on PostgreSQL (see {@link DELIVERED_GROUP_POSTGRES}): one round
 * trip for a lane's whole group, where one statement per record waited for the event loop between each, or for the
 * groups of several lanes (each record's `lane`). Every `input` must have the outcome `delivered`, the same
 * `workerId` and `now`, and no `nextCheckOnly`.
 * @returns one result per record, in the order given.
 * @throws RangeError when a record is not delivered, is a check-only try or differs in worker or time; what the
 *   driver throws (nothing of the group is then written, or the statement's outcome is unknown).
 */
export async function deliveredGroupInOneStatement(
  db: Kysely<Database>,
  records: readonly GroupRecord[],
): Promise<FinishResult[]> {
  if (records.length === 0) return [];
  const result = await db.executeQuery(deliveredGroupQuery(records));
  const byOrder = new Map(result.rows.map((row) => [Number(row.ord), row]));
  return records.map((_, index) => {
    const row = byOrder.get(index + 1);
    return { applied: row?.applied === true, nextStarted: row?.started === true };
  });
}

/**
 * `startDeliveries` (src/store/delivery-next.ts) on PostgreSQL as one statement: claimed, not yet started deliveries
 * of one lane batch started in the order given, stopping at the first that can be neither started (still this
 * claim's, pending, its lane unchanged; read `for update`) nor found started already (its attempt row written by an
 * earlier try whose answer was lost). Parameters: $1 the time (epoch ms), $2 the worker, then one array per column
 * of `input`. A {@link KEY_LOOKUPS} statement, as {@link DELIVERED_GROUP_POSTGRES} is.
 */
const START_GROUP_POSTGRES = `${KEY_LOOKUPS} with input as (
  select * from unnest($3::varchar[], $4::varchar[], $5::bigint[], $6::varchar[], $7::integer[], $8::text[],
    $9::text[], $10::text[], $11::text[])
    with ordinality as t(next_event_id, next_endpoint_id, next_locked_at, next_attempt_id, next_number, next_url,
      next_url_sealed, next_hmac_key, next_secret, ord)
), already as (
  select i.ord from input i join webhook_attempts a on a.id = i.next_attempt_id
  where a.id = any (array(select next_attempt_id from input))
), ${STARTABLE_NEXT}, chain as (
  select i.ord, x.ord is null as fresh,
    bool_and(x.ord is not null or s.ord is not null) over (order by i.ord) as start
  from input i left join already x on x.ord = i.ord left join startable s on s.ord = i.ord
), ${startChosen('c.start and c.fresh')}
select count(*) filter (where start) as started from chain`;

/**
 * Starts `deliveries` (one lane batch's, in `sequence` order) in one statement on PostgreSQL, as `startDeliveries`
 * does in a transaction (docs/decisions/0050-lane-windows.md, docs/decisions/0059-lane-record-groups.md).
 * @returns how many of `deliveries`, from the first, are started.
 * @throws what the driver throws (nothing is started then, or whether it was is unknown).
 */
export async function startGroupInOneStatement(
  db: Kysely<Database>,
  deliveries: readonly NextAttempt[],
  workerId: string,
  now: number,
): Promise<number> {
  if (deliveries.length === 0) return 0;
  const result = await db.executeQuery(startGroupQuery(deliveries, workerId, now));
  return Number(result.rows[0]?.started ?? 0);
}

/**
 * The statement {@link startGroupInOneStatement} runs: {@link START_GROUP_POSTGRES} with the batch `deliveries`, the
 * worker `workerId` and the time `now` (epoch ms). Exported for the plan tests (test/store/key-lookup-plans.test.ts).
 */
export function startGroupQuery(
  deliveries: readonly NextAttempt[],
  workerId: string,
  now: number,
): CompiledQuery<{ started: string | number }> {
  return CompiledQuery.raw(START_GROUP_POSTGRES, [now, workerId, ...nextColumns(deliveries)]);
}
