import type { Insertable, Kysely, Transaction } from 'kysely';
import { compiledStatement, insertRows, ROWS_PER_INSERT } from './compiled.ts';
import type { Database, WebhookDeliveriesTable } from './schema.ts';
import { toMs } from './times.ts';

/**
 * The webhook delivery queue (docs/decisions/0005-outbox-and-delivery.md), Graphile-Worker shape: a delivery row is
 * due when `status` is `pending` and `run_at` (epoch ms) has passed; a worker claims it by setting
 * `locked_by`/`locked_at` and counts the attempt in `attempts` as it claims (with an attempt row,
 * `delivery-claims.ts`), so a delivery whose attempts never finish is bounded by `max_attempts` too; it posts, then
 * completes the attempt and applies the outcome in one transaction, conditioned on still holding the claim. A lock
 * (`locked_by` and `locked_at`, always set and cleared together) is only ever held by a `pending` row: every change
 * out of `pending` clears it (the claim's in-flight test relies on this). The claims of a process known dead are
 * released by the node registry (`nodes.ts`); a claim older than the stale timeout belongs to a dead worker and may
 * be taken over in any case. No retry state lives in memory.
 */

/** Delivery statuses: `pending` (queued or in flight), `delivered`, `failed` (after the last retry or a 410). */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** A new delivery row, written in the recording transaction (docs/decisions/0005-outbox-and-delivery.md outbox). */
export interface NewDelivery {
  eventId: string;
  /** The endpoint it goes to (docs/decisions/0035-webhook-endpoints.md); omitted or `''`: the default webhook. */
  endpointId?: string;
  instanceId: string;
  sequence: number;
  /** Attempts allowed in this round: the first try plus one per retry delay. */
  maxAttempts: number;
  /** Epoch ms when the first attempt is due. */
  runAt: number;
  /** RFC 3339. */
  now: string;
}

/**
 * Queues the deliveries of events (inside the transaction that records them), at most {@link ROWS_PER_INSERT} a
 * statement.
 * @throws RangeError when a delivery's `now` is not a time.
 */
export async function insertDeliveries(
  trx: Transaction<Database>,
  deliveries: readonly NewDelivery[],
): Promise<void> {
  const rows = deliveries.map((delivery) => {
    const now = toMs(delivery.now);
    return {
      event_id: delivery.eventId,
      endpoint_id: delivery.endpointId ?? '',
      instance_id: delivery.instanceId,
      sequence: delivery.sequence,
      status: 'pending',
      attempts: 0,
      max_attempts: delivery.maxAttempts,
      run_at: delivery.runAt,
      locked_by: null,
      locked_at: null,
      last_error: null,
      last_status: null,
      delivered_at: null,
      created_at: now,
      updated_at: now,
    };
  });
  await insertRows(
    rows,
    (row) => INSERT_DELIVERY.run(trx, row),
    (chunk) => trx.insertInto('webhook_deliveries').values(chunk).execute(),
  );
}

/** One delivery row (the common batch of one: compiled once per store, src/store/compiled.ts). */
const INSERT_DELIVERY = compiledStatement<Insertable<WebhookDeliveriesTable>>((db, arg) =>
  db.insertInto('webhook_deliveries').values({
    event_id: arg('event_id'),
    endpoint_id: arg('endpoint_id'),
    instance_id: arg('instance_id'),
    sequence: arg('sequence'),
    status: arg('status'),
    attempts: arg('attempts'),
    max_attempts: arg('max_attempts'),
    run_at: arg('run_at'),
    locked_by: arg('locked_by'),
    locked_at: arg('locked_at'),
    last_error: arg('last_error'),
    last_status: arg('last_status'),
    delivered_at: arg('delivered_at'),
    created_at: arg('created_at'),
    updated_at: arg('updated_at'),
  }),
);

/** What happened on one attempt (completes the attempt row written with the claim). */
export interface AttemptRecord {
  statusCode: number | null;
  /** Milliseconds from the start of the request to the end of the response (or the failure). */
  durationMs: number;
  error: string | null;
  /** First 2 KB of the response as text (NUL characters replaced), or null. */
  responseBody: string | null;
  responseTruncated: boolean;
}

/**
 * The delivery's next state after an attempt: `delivered`; `retry` at `runAt` (epoch ms); `failed` (no retries
 * left); `gone` (410: fails this delivery, disables the instance's default webhook, or for an endpoint's delivery
 * that endpoint only (docs/decisions/0035-webhook-endpoints.md), and fails the other pending ones of that lane).
 */
export type AttemptOutcome =
  | { kind: 'delivered' }
  | { kind: 'retry'; runAt: number }
  | { kind: 'failed' }
  | { kind: 'gone'; reason: string };

/** Completes this worker's attempt row (hot path: compiled once per store, src/store/compiled.ts). */
const COMPLETE_ATTEMPT = compiledStatement<{
  now: number;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
  responseTruncated: number;
  attemptId: string;
  workerId: string;
}>((db, arg) =>
  db
    .updateTable('webhook_attempts')
    .set({
      finished_at: arg('now'),
      status_code: arg('statusCode'),
      duration_ms: arg('durationMs'),
      error: arg('error'),
      response_body: arg('responseBody'),
      response_truncated: arg('responseTruncated'),
    })
    .where('id', '=', arg('attemptId'))
    .where('worker', '=', arg('workerId')),
);

/** Marks a claimed delivery delivered while the claim is still this worker's (hot path, compiled). */
const MARK_DELIVERED = compiledStatement<{
  now: number;
  statusCode: number | null;
  eventId: string;
  endpointId: string;
  workerId: string;
  lockedAt: number;
}>((db, arg) =>
  db
    .updateTable('webhook_deliveries')
    .set({
      status: 'delivered',
      delivered_at: arg('now'),
      locked_by: null,
      locked_at: null,
      last_status: arg('statusCode'),
      last_error: null,
      updated_at: arg('now'),
    })
    .where('event_id', '=', arg('eventId'))
    .where('endpoint_id', '=', arg('endpointId'))
    .where('locked_by', '=', arg('workerId'))
    .where('locked_at', '=', arg('lockedAt'))
    .where('status', '=', 'pending'),
);

/**
 * Completes an attempt row and applies the outcome to its delivery, in one transaction (Graphile Worker's
 * `complete_job`/`fail_job`). `attempts` is not changed: the attempt was counted when it was claimed. The
 * attempt row (this worker's own) is always completed: the attempt happened. The delivery row changes only while
 * it still holds this claim (`locked_by` = `workerId` and `locked_at` = `lockedAt`): a worker releases only its
 * own locks, so one whose claim was taken over as stale (or released at shutdown and claimed again) cannot
 * overwrite the new owner's state.
 * @returns true when the claim was still held and the outcome applied.
 * @throws RangeError when `input.now` is not a time.
 */
export function finishAttempt(db: Kysely<Database>, input: FinishInput): Promise<boolean> {
  return db.transaction().execute(async (trx) => (await finishAttemptIn(trx, input)).applied);
}

/**
 * {@link finishAttempt}, which also starts `input.next` when there is one.
 * @returns `applied` as {@link finishAttempt} returns it, and `nextStarted`: whether `input.next` was started
 *   (false without one, when the outcome is not `delivered`, or when the claim was no longer this worker's).
 * @throws RangeError when `input.now` is not a time.
 */
export function finishAndStartNext(
  db: Kysely<Database>,
  input: FinishInput,
): Promise<{ applied: boolean; nextStarted: boolean }> {
  return db.transaction().execute((trx) => finishAttemptIn(trx, input));
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
}

/** Counts the started attempt on a claimed, not yet started delivery while the claim is this worker's (compiled). */
const COUNT_ATTEMPT = compiledStatement<{
  eventId: string;
  endpointId: string;
  workerId: string;
  lockedAt: number;
}>((db, arg) =>
  db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('event_id', '=', arg('eventId'))
    .where('endpoint_id', '=', arg('endpointId'))
    .where('locked_by', '=', arg('workerId'))
    .where('locked_at', '=', arg('lockedAt'))
    .where('status', '=', 'pending'),
);

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
    finished_at: null,
    status_code: null,
    duration_ms: null,
    error: null,
    response_body: null,
    response_truncated: 0,
  }),
);

/** Starts `next` in `trx` (see `FinishInput.next`). @returns whether it was started. */
async function startNext(
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

/** What {@link finishAttempt} applies: the claim it ends, what the attempt saw and the outcome. */
export interface FinishInput {
  eventId: string;
  /** The delivery's endpoint; omitted or `''`: the default webhook. */
  endpointId?: string;
  instanceId: string;
  attemptId: string;
  workerId: string;
  /** `locked_at` of the claim, epoch ms (`ClaimedDelivery.lockedAt`). */
  lockedAt: number;
  /**
   * The lane batch's next delivery (docs/decisions/0048-lane-batches.md), started in this transaction when the
   * outcome is `delivered` and the claim still held: its attempt counted and its attempt row written, so a crash
   * after this commit shows it in flight, and one before shows nothing started.
   */
  next?: NextAttempt;
  attempt: AttemptRecord;
  outcome: AttemptOutcome;
  /** RFC 3339. */
  now: string;
}

/** {@link finishAndStartNext} inside the transaction `trx`. @throws RangeError when `input.now` is not a time. */
async function finishAttemptIn(
  trx: Transaction<Database>,
  input: FinishInput,
): Promise<{ applied: boolean; nextStarted: boolean }> {
  const { eventId, workerId, attempt, outcome } = input;
  const endpointId = input.endpointId ?? '';
  const now = toMs(input.now);
  await COMPLETE_ATTEMPT.run(trx, {
    now,
    statusCode: attempt.statusCode,
    durationMs: attempt.durationMs,
    error: attempt.error,
    responseBody: attempt.responseBody,
    responseTruncated: attempt.responseTruncated ? 1 : 0,
    attemptId: input.attemptId,
    workerId,
  });
  const base = {
    locked_by: null,
    locked_at: null,
    last_status: attempt.statusCode,
    last_error: attempt.error,
    updated_at: now,
  };
  const update = trx
    .updateTable('webhook_deliveries')
    .where('event_id', '=', eventId)
    .where('endpoint_id', '=', endpointId)
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', input.lockedAt)
    .where('status', '=', 'pending');
  let result: { numUpdatedRows: bigint };
  switch (outcome.kind) {
    case 'delivered': {
      const delivered = await MARK_DELIVERED.run(trx, {
        now,
        statusCode: attempt.statusCode,
        eventId,
        endpointId,
        workerId,
        lockedAt: input.lockedAt,
      });
      result = { numUpdatedRows: delivered.numAffectedRows ?? 0n };
      break;
    }
    case 'retry':
      result = await update.set({ ...base, run_at: outcome.runAt }).executeTakeFirst();
      break;
    case 'failed':
      result = await update.set({ ...base, status: 'failed' }).executeTakeFirst();
      break;
    case 'gone':
      result = await update.set({ ...base, status: 'failed' }).executeTakeFirst();
      if (result.numUpdatedRows > 0n && endpointId !== '') {
        // An endpoint's 410 disables that endpoint only (docs/decisions/0035-webhook-endpoints.md).
        await trx
          .updateTable('webhook_endpoints')
          .set({ enabled: 0, disabled_at: now, disabled_reason: outcome.reason, updated_at: now })
          .where('id', '=', endpointId)
          .execute();
        await failLane(trx, input, endpointId, `endpoint disabled: ${outcome.reason}`, now);
      } else if (result.numUpdatedRows > 0n) {
        await trx
          .updateTable('webhook_state')
          .set({ disabled_at: now, disabled_reason: outcome.reason })
          .where('instance_id', '=', input.instanceId)
          .execute();
        await failLane(trx, input, '', `webhook disabled: ${outcome.reason}`, now);
      }
      break;
  }
  const applied = result.numUpdatedRows > 0n;
  const nextStarted =
    applied && outcome.kind === 'delivered' && input.next !== undefined
      ? await startNext(trx, input.next, workerId, now)
      : false;
  return { applied, nextStarted };
}

/**
 * Fails the pending deliveries of a lane whose receiver answered 410 (docs/decisions/0005-outbox-and-delivery.md):
 * those not claimed, and the rest of this claim's lane batch (docs/decisions/0048-lane-batches.md), locked but not
 * started (no attempt counted or logged). A delivery another worker holds is left to it.
 */
async function failLane(
  trx: Transaction<Database>,
  input: FinishInput,
  endpointId: string,
  lastError: string,
  now: number,
): Promise<void> {
  const lane = trx
    .updateTable('webhook_deliveries')
    .where('instance_id', '=', input.instanceId)
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending');
  await lane
    .set({ status: 'failed', last_error: lastError, updated_at: now })
    .where('locked_by', 'is', null)
    .execute();
  await lane
    .set({ status: 'failed', last_error: lastError, updated_at: now, locked_by: null, locked_at: null })
    .where('locked_by', '=', input.workerId)
    .where('locked_at', '=', input.lockedAt)
    .execute();
}

/**
 * Gives claims of `workerId` back (shutdown: attempts still in flight after the grace period), so another process
 * retries them at once instead of after the stale timeout. Only rows this worker holds are touched. The attempts
 * stay counted: each was started, and its attempt row is marked abandoned by the next claim. `deliveries` (event
 * id and endpoint id, `''` for the default webhook) narrows it; omitted: every claim of the worker.
 * @returns how many claims were released.
 */
export async function releaseClaims(
  db: Kysely<Database>,
  workerId: string,
  deliveries?: readonly { eventId: string; endpointId: string }[],
): Promise<number> {
  if (deliveries !== undefined && deliveries.length === 0) return 0;
  let query = db
    .updateTable('webhook_deliveries')
    .set({ locked_by: null, locked_at: null })
    .where('locked_by', '=', workerId);
  if (deliveries !== undefined)
    query = query.where((eb) =>
      eb(
        eb.refTuple('event_id', 'endpoint_id'),
        'in',
        deliveries.map((d) => eb.tuple(d.eventId, d.endpointId)),
      ),
    );
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Gives back claims of `workerId` that were never started (the rest of a lane batch after an attempt that was not
 * delivered, at the end of the batch's time budget, or at a stop: docs/decisions/0048-lane-batches.md): unlocked,
 * ready for the next claim. No attempt was counted or logged for them. Only rows that still hold this claim
 * (`lockedAt`) are touched, so a claim taken over meanwhile is left to its new owner.
 * @returns how many claims were given back.
 */
export async function returnUnstarted(
  db: Kysely<Database>,
  workerId: string,
  claims: readonly { eventId: string; endpointId: string; lockedAt: number }[],
): Promise<number> {
  let returned = 0;
  for (const lockedAt of new Set(claims.map((claim) => claim.lockedAt))) {
    const group = claims.filter((claim) => claim.lockedAt === lockedAt);
    const result = await db
      .updateTable('webhook_deliveries')
      .set({ locked_by: null, locked_at: null })
      .where((eb) =>
        eb(
          eb.refTuple('event_id', 'endpoint_id'),
          'in',
          group.map((claim) => eb.tuple(claim.eventId, claim.endpointId)),
        ),
      )
      .where('locked_by', '=', workerId)
      .where('locked_at', '=', lockedAt)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    returned += Number(result.numUpdatedRows);
  }
  return returned;
}

/** Result of {@link requeueDelivery}. */
export type RequeueResult = 'queued' | 'in-flight' | 'not-found';

/**
 * Queues an event again (docs/decisions/0005-outbox-and-delivery.md `redeliver`): a new round with `maxAttempts`
 * attempts, due at `runAt`. The row's record of the previous round's outcome (`delivered_at`, `last_error`,
 * `last_status`) is cleared so the log shows a plain pending delivery; the attempt rows are kept (numbering
 * continues). `endpointId` picks the delivery row (docs/decisions/0035-webhook-endpoints.md): `''` (the default) is
 * the default webhook's, which is created when the event was never queued (it was recorded without a URL or
 * subscription); an endpoint's row is never created, since an endpoint receives only the events queued for it.
 * @returns `not-found` when the event is not one of `instanceId`'s, or has no delivery row for endpoint
 *   `endpointId`; `in-flight` when an attempt holds a live claim on it (not stale before `staleBefore`, epoch ms).
 * @throws RangeError when `input.now` is not a time.
 */
export async function requeueDelivery(
  db: Kysely<Database>,
  input: {
    instanceId: string;
    eventId: string;
    /** The endpoint whose delivery is queued again; omitted or `''`: the default webhook. */
    endpointId?: string;
    maxAttempts: number;
    runAt: number;
    staleBefore: number;
    /** RFC 3339. */
    now: string;
  },
): Promise<RequeueResult> {
  const endpointId = input.endpointId ?? '';
  return db.transaction().execute(async (trx) => {
    const event = await trx
      .selectFrom('webhook_events')
      .select(['id', 'sequence'])
      .where('id', '=', input.eventId)
      .where('instance_id', '=', input.instanceId)
      .executeTakeFirst();
    if (!event) return 'not-found';
    const existing = await trx
      .selectFrom('webhook_deliveries')
      .select(['locked_at', 'status'])
      .where('event_id', '=', input.eventId)
      .where('endpoint_id', '=', endpointId)
      .executeTakeFirst();
    if (!existing) {
      if (endpointId !== '') return 'not-found';
      await insertDeliveries(trx, [
        {
          eventId: input.eventId,
          instanceId: input.instanceId,
          sequence: Number(event.sequence),
          maxAttempts: input.maxAttempts,
          runAt: input.runAt,
          now: input.now,
        },
      ]);
      return 'queued';
    }
    const result = await trx
      .updateTable('webhook_deliveries')
      .set({
        status: 'pending',
        attempts: 0,
        max_attempts: input.maxAttempts,
        run_at: input.runAt,
        locked_by: null,
        locked_at: null,
        // The previous round's outcome: a pending row must not show it (its attempts rows stay as history).
        last_error: null,
        last_status: null,
        delivered_at: null,
        updated_at: toMs(input.now),
      })
      .where('event_id', '=', input.eventId)
      .where('endpoint_id', '=', endpointId)
      .where((eb) => eb.or([eb('locked_at', 'is', null), eb('locked_at', '<', input.staleBefore)]))
      .executeTakeFirst();
    return result.numUpdatedRows > 0n ? 'queued' : 'in-flight';
  });
}
