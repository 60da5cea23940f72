import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import { compiledStatement } from './compiled.ts';
import type { ClaimedDelivery } from './delivery-claims.ts';
import type { FinishInput, FinishResult } from './delivery-finish.ts';
import { startGroupInOneStatement } from './delivery-group.ts';
import type { Database } from './schema.ts';
import { toMs } from './times.ts';

/**
 * Starting a lane batch's next delivery in the transaction that records the attempt before it
 * (docs/decisions/0048-lane-batches.md): the statements that count its attempt and write its attempt row, and on
 * PostgreSQL the delivered record and the start in one statement. `delivery-finish.ts` runs them.
 */

/**
 * The delivered case of {@link finishAndStartNext} on PostgreSQL as one statement: the same four writes (attempt
 * completed, delivery marked delivered, the next delivery counted and its attempt row written), each conditioned as
 * in the transaction form (the attempt completed while open: one a takeover marked abandoned stays so,
 * docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md), in data-modifying CTEs. One statement is atomic on its own, so it takes one round trip
 * instead of six (BEGIN, four statements, COMMIT), the cost that bounds PostgreSQL's delivery rate
 * (docs/benchmarks.md). The next delivery is started only when the delivery row was still this claim's and the lane
 * unchanged (see `NextAttempt`); an attempt row already holding the next delivery's id counts as started (an
 * earlier try of the same record committed before its answer was lost). The statement reads that row as of its own
 * start, so it serves a record's first try only: a try again may begin while the earlier try's commit still runs on
 * the server, and it is written in the transaction form instead (`FinishInput.offeredBefore`).
 */
const DELIVERED_POSTGRES = `with completed as (
  update webhook_attempts set finished_at = $1::bigint, status_code = $2::integer, duration_ms = $3::integer,
    error = null, response_body = $4::text, response_truncated = $5::integer
  where id = $6::varchar and worker = $7::varchar and finished_at is null
  returning id
), delivered as (
  update webhook_deliveries set status = 'delivered', delivered_at = $1::bigint, locked_by = null, locked_at = null,
    last_status = $2::integer, last_error = null, updated_at = $1::bigint
  where event_id = $8::varchar and endpoint_id = $9::varchar and locked_by = $7::varchar
    and locked_at = $10::bigint and status = 'pending'
  returning event_id
), started as (
  update webhook_deliveries d set attempts = d.attempts + 1
  where d.event_id = $11::varchar and d.endpoint_id = $12::varchar and d.locked_by = $7::varchar
    and d.locked_at = $13::bigint and d.status = 'pending' and exists (select 1 from delivered)
    and (
      (d.endpoint_id = '' and exists (
          select 1 from instances i where i.id = d.instance_id and i.webhook_url = $16::text
            and coalesce(i.hmac_key, '') = $18::text)
        and not exists (
          select 1 from webhook_state s where s.instance_id = d.instance_id and s.disabled_at is not null))
      or exists (
        select 1 from webhook_endpoints w where w.id = d.endpoint_id and w.instance_id = d.instance_id
          and w.enabled = 1 and w.url = $16::text and coalesce(w.url_sealed, '') = $17::text
          and w.secret = $19::text)
    )
  returning d.event_id
), opened as (
  insert into webhook_attempts (id, event_id, endpoint_id, number, url, worker, attempted_at, finished_at,
    status_code, duration_ms, error, response_body, response_truncated)
  select $14::varchar, $11::varchar, $12::varchar, $15::integer, $16::text, $7::varchar, $1::bigint, null, null,
    null, null, null, 0
  from started
  returning id
)
select (select count(*) from delivered) as applied,
  (select count(*) from opened) + (select count(*) from webhook_attempts where id = $14::varchar) as started`;

/** Runs {@link DELIVERED_POSTGRES}. @throws what the driver throws. */
export async function deliveredInOneStatement(
  db: Kysely<Database>,
  input: FinishInput,
): Promise<FinishResult> {
  const now = toMs(input.now);
  const { attempt, next } = input;
  const result = await db.executeQuery<{ applied: string | number; started: string | number }>(
    CompiledQuery.raw(DELIVERED_POSTGRES, [
      now,
      attempt.statusCode,
      attempt.durationMs,
      attempt.responseBody,
      attempt.responseTruncated ? 1 : 0,
      input.attemptId,
      input.workerId,
      input.eventId,
      input.endpointId ?? '',
      input.lockedAt,
      next?.eventId ?? null,
      next?.endpointId ?? null,
      next?.lockedAt ?? null,
      next?.attemptId ?? null,
      next?.attemptNumber ?? null,
      next?.url ?? null,
      next?.urlSealed ?? null,
      next?.hmacKeySealed ?? null,
      next?.endpointSecretSealed ?? null,
    ]),
  );
  const [row] = result.rows;
  return { applied: Number(row?.applied ?? 0) > 0, nextStarted: Number(row?.started ?? 0) > 0 };
}

/** The delivery a finishing attempt starts (`FinishInput.next`): a lane batch's next one, claimed not started. */
export interface NextAttempt {
  eventId: string;
  /** `''` for the default webhook. */
  endpointId: string;
  /** `locked_at` of its claim, epoch ms. */
  lockedAt: number;
  /** Id and number of the attempt row to write (`ClaimedDelivery.attemptId`, `attemptNumber`). */
  attemptId: string;
  attemptNumber: number;
  /** The URL as shown in the log. */
  url: string;
  /**
   * The lane's settings the batch was claimed with (`ClaimedDelivery`): `''` for null. The next delivery is started
   * only while the lane still has them: the same URL (and sealed broker URL), the same HMAC key or endpoint secret,
   * the endpoint enabled or the default webhook not disabled; a lane changed meanwhile gets the rest of the batch
   * back, claimed again with its new settings.
   */
  urlSealed: string;
  hmacKeySealed: string;
  endpointSecretSealed: string;
}

/** The {@link NextAttempt} of a claimed, not yet started delivery. */
export function nextAttemptOf(delivery: ClaimedDelivery): NextAttempt {
  return {
    eventId: delivery.eventId,
    endpointId: delivery.endpointId,
    lockedAt: delivery.lockedAt,
    attemptId: delivery.attemptId,
    attemptNumber: delivery.attemptNumber,
    url: delivery.url,
    urlSealed: delivery.urlSealed ?? '',
    hmacKeySealed: delivery.hmacKeySealed ?? '',
    endpointSecretSealed: delivery.endpointSecretSealed ?? '',
  };
}

/**
 * Counts the started attempt on a claimed, not yet started delivery while the claim is this worker's and its lane
 * still has the settings the batch was claimed with (see `NextAttempt`) (compiled).
 */
const COUNT_ATTEMPT = compiledStatement<{
  eventId: string;
  endpointId: string;
  workerId: string;
  lockedAt: number;
  url: string;
  urlSealed: string;
  hmacKeySealed: string;
  endpointSecretSealed: string;
}>((db, arg) =>
  db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('event_id', '=', arg('eventId'))
    .where('endpoint_id', '=', arg('endpointId'))
    .where('locked_by', '=', arg('workerId'))
    .where('locked_at', '=', arg('lockedAt'))
    .where('status', '=', 'pending')
    .where(({ or, and, eb, exists, not, selectFrom }) =>
      or([
        and([
          eb('webhook_deliveries.endpoint_id', '=', ''),
          exists(
            selectFrom('instances as i')
              .select('i.id')
              .whereRef('i.id', '=', 'webhook_deliveries.instance_id')
              .where('i.webhook_url', '=', arg('url'))
              .where((inner) =>
                inner(inner.fn.coalesce('i.hmac_key', inner.val('')), '=', arg('hmacKeySealed')),
              ),
          ),
          not(
            exists(
              selectFrom('webhook_state as s')
                .select('s.instance_id')
                .whereRef('s.instance_id', '=', 'webhook_deliveries.instance_id')
                .where('s.disabled_at', 'is not', null),
            ),
          ),
        ]),
        exists(
          selectFrom('webhook_endpoints as w')
            .select('w.id')
            .whereRef('w.id', '=', 'webhook_deliveries.endpoint_id')
            .whereRef('w.instance_id', '=', 'webhook_deliveries.instance_id')
            .where('w.enabled', '=', 1)
            .where('w.url', '=', arg('url'))
            .where((inner) => inner(inner.fn.coalesce('w.url_sealed', inner.val('')), '=', arg('urlSealed')))
            .where('w.secret', '=', arg('endpointSecretSealed')),
        ),
      ]),
    ),
);

/** Whether the attempt row `id` exists: a start an earlier try of the same record committed (compiled). */
export const ATTEMPT_EXISTS = compiledStatement<{ id: string }, { id: string }>((db, arg) =>
  db.selectFrom('webhook_attempts').select('id').where('id', '=', arg('id')),
);

/** The fields of an attempt row while its attempt runs: nothing known yet. */
export const OPEN_ATTEMPT_FIELDS = {
  finished_at: null,
  status_code: null,
  duration_ms: null,
  error: null,
  response_body: null,
  response_truncated: 0,
} as const;

/** Writes a started attempt's row (compiled). */
const OPEN_ATTEMPT = compiledStatement<{
  id: string;
  eventId: string;
  endpointId: string;
  number: number;
  url: string;
  workerId: string;
  now: number;
}>((db, arg) =>
  db.insertInto('webhook_attempts').values({
    id: arg('id'),
    event_id: arg('eventId'),
    endpoint_id: arg('endpointId'),
    number: arg('number'),
    url: arg('url'),
    worker: arg('workerId'),
    attempted_at: arg('now'),
    ...OPEN_ATTEMPT_FIELDS,
  }),
);

/** Starts `next` in `trx` (see `FinishInput.next`). @returns whether it was started. */
export async function startNext(
  trx: Transaction<Database>,
  next: NextAttempt,
  workerId: string,
  now: number,
): Promise<boolean> {
  const counted = await COUNT_ATTEMPT.run(trx, {
    eventId: next.eventId,
    endpointId: next.endpointId,
    workerId,
    lockedAt: next.lockedAt,
    url: next.url,
    urlSealed: next.urlSealed,
    hmacKeySealed: next.hmacKeySealed,
    endpointSecretSealed: next.endpointSecretSealed,
  });
  if ((counted.numAffectedRows ?? 0n) === 0n) return false;
  await OPEN_ATTEMPT.run(trx, {
    id: next.attemptId,
    eventId: next.eventId,
    endpointId: next.endpointId,
    number: next.attemptNumber,
    url: next.url,
    workerId,
    now,
  });
  return true;
}

/**
 * Starts claimed, not yet started deliveries of one lane batch in one transaction, in the order given (their
 * `sequence` order), stopping at the first that cannot be started: the same conditions as {@link startNext} (the
 * claim still this worker's, the lane unchanged). A lane window of several requests
 * (docs/decisions/0050-lane-windows.md) opens its first requests this way. A delivery whose attempt row already
 * exists counts as started: an earlier try of the same transaction committed before its answer was lost. With
 * `dialect` `postgres` the same in one statement (`startGroupInOneStatement`, src/store/delivery-group.ts).
 *
 * `again`: an earlier try failed with its outcome unknown. On PostgreSQL its commit may still be running on the
 * server (its connection broke as it committed), and a statement begun meanwhile reads the attempt rows as they were
 * before it, then waits for the deliveries' rows and starts them a second time (failing on the attempt row's key). So
 * a try again first waits for the rows' locks, in a statement of its own: whatever held them has ended when the
 * statement that starts them begins, and what it committed is read as started (docs/decisions/0011-store-faults.md).
 * @returns how many of `deliveries`, from the first, are started.
 * @throws what the driver throws (nothing is started then, or on PostgreSQL whether it was is unknown).
 */
export async function startDeliveries(
  db: Kysely<Database>,
  deliveries: readonly NextAttempt[],
  workerId: string,
  now: number,
  dialect: 'sqlite' | 'postgres' = 'sqlite',
  again = false,
): Promise<number> {
  // On PostgreSQL one statement instead of three round trips per delivery (docs/decisions/0059-lane-record-groups.md).
  if (dialect === 'postgres') {
    if (again && deliveries.length > 0) await awaitRowLocks(db, deliveries);
    return startGroupInOneStatement(db, deliveries, workerId, now);
  }
  return db.transaction().execute(async (trx) => {
    let started = 0;
    for (const delivery of deliveries) {
      const already = (await ATTEMPT_EXISTS.run(trx, { id: delivery.attemptId })).rows.length > 0;
      if (!already && !(await startNext(trx, delivery, workerId, now))) break;
      started += 1;
    }
    return started;
  });
}

/**
 * How many of `deliveries`, from the first, an earlier try of {@link startDeliveries} started (their attempt rows
 * exist), starting none: the try again of an opening that may no longer start anything (its worker stopping, or its
 * claim too old, docs/decisions/0048-lane-batches.md) still sends what a try whose answer was lost started. On
 * PostgreSQL it first waits for the rows' locks, as {@link startDeliveries} does with `again`.
 * @throws what the driver throws.
 */
export async function startedBefore(
  db: Kysely<Database>,
  deliveries: readonly NextAttempt[],
  dialect: 'sqlite' | 'postgres' = 'sqlite',
): Promise<number> {
  if (deliveries.length === 0) return 0;
  if (dialect === 'postgres') await awaitRowLocks(db, deliveries);
  const rows = await db
    .selectFrom('webhook_attempts')
    .select('id')
    .where(
      'id',
      'in',
      deliveries.map((delivery) => delivery.attemptId),
    )
    .execute();
  const found = new Set(rows.map((row) => row.id));
  const missing = deliveries.findIndex((delivery) => !found.has(delivery.attemptId));
  return missing === -1 ? deliveries.length : missing;
}

/**
 * Waits until no other transaction holds a lock on the delivery rows of `deliveries` (PostgreSQL: a `select … for
 * update` on its own, its locks released as it ends): a transaction still committing on the server, whose client
 * lost its connection, has then ended, and a statement begun after this one reads what it committed.
 */
async function awaitRowLocks(db: Kysely<Database>, deliveries: readonly NextAttempt[]): Promise<void> {
  await db
    .selectFrom('webhook_deliveries')
    .select('event_id')
    .where((eb) =>
      eb(
        eb.refTuple('event_id', 'endpoint_id'),
        'in',
        deliveries.map((delivery) => eb.tuple(delivery.eventId, delivery.endpointId)),
      ),
    )
    .forUpdate()
    .execute();
}
