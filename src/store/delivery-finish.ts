import type { Kysely, Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import { extended } from '../domain/objects.ts';
import { compiledStatement, isPostgres } from './compiled.ts';
import { ATTEMPT_EXISTS, deliveredInOneStatement, type NextAttempt, startNext } from './delivery-next.ts';
import type { Database } from './schema.ts';
import { toMs } from './times.ts';

/**
 * Ending a claimed delivery's attempt (docs/decisions/0005-outbox-and-delivery.md): the attempt row completed and
 * the outcome applied in one transaction, conditioned on still holding the claim, and with a lane batch
 * (docs/decisions/0048-lane-batches.md) the batch's next delivery started in the same transaction. See
 * `deliveries.ts` for the queue's life cycle.
 */
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
 * A `gone` carries the URL the attempt was sent to (`url` as shown and `urlSealed`, `ClaimedDelivery`'s): a 410 from
 * a URL the lane no longer has disables nothing, and the delivery is tried again at once at the new one, due at
 * `runAt` (default the record's `now`). Due times are on the store's clock
 * (docs/decisions/0005-outbox-and-delivery.md, "Due times").
 */
export type AttemptOutcome =
  | { kind: 'delivered' }
  | { kind: 'retry'; runAt: number }
  | { kind: 'failed' }
  | { kind: 'gone'; reason: string; url: string; urlSealed: string | null; runAt?: number };

/**
 * Completes this worker's attempt row while it is open (hot path: compiled once per store, src/store/compiled.ts): one
 * a claim that took the delivery over marked abandoned stays so
 * (docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md).
 */
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
    .where('worker', '=', arg('workerId'))
    .where('finished_at', 'is', null),
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
 * attempt row (this worker's own) is completed while it is open: the attempt happened. The delivery row changes only
 * while it still holds this claim (`locked_by` = `workerId` and `locked_at` = `lockedAt`): a worker releases only its
 * own locks, so one whose claim was taken over as stale (or released at shutdown and claimed again) cannot
 * overwrite the new owner's state, nor the attempt the new claim marked abandoned: the log keeps what it said of it
 * (docs/decisions/0113-an-abandoned-attempt-stays-abandoned.md). A record tried again after its first try committed
 * (its answer lost) finds its attempt completed and leaves it so.
 * @returns true when the claim was still held and the outcome applied.
 * @throws RangeError when `input.now` is not a time.
 */
export function finishAttempt(db: Kysely<Database>, input: FinishInput): Promise<boolean> {
  return db.transaction().execute(async (trx) => (await finishAttemptIn(trx, input)).applied);
}

/** What {@link finishAndStartNext} returns. */
export interface FinishResult {
  /** The claim was still held and the outcome applied. */
  applied: boolean;
  /** `input.next` was started (or an earlier try of the same record had started it). */
  nextStarted: boolean;
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
  dialect: DatabaseConfig['dialect'] = 'sqlite',
): Promise<FinishResult> {
  if (
    dialect === 'postgres' &&
    input.outcome.kind === 'delivered' &&
    input.nextCheckOnly !== true &&
    input.offeredBefore !== true
  )
    return deliveredInOneStatement(db, input);
  return db.transaction().execute((trx) => finishAttemptIn(trx, input));
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
  /**
   * With `next`: do not start it, only report whether an earlier try of this record started it (its attempt row
   * exists). A record tried again once starting is no longer allowed (the worker stopping, the claim grown old)
   * still learns what its first try, committed but unanswered, did.
   */
  nextCheckOnly?: boolean;
  /**
   * With `next`: an earlier try of this record offered to start it and its outcome is unknown (its answer lost). The
   * record is then written in the transaction form on PostgreSQL too, whose statements each read what committed
   * before they began: the earlier try's commit may still be running on the server (its connection broke as it
   * committed), and the one-statement form, which waits for its rows but reads the next delivery's attempt row as of
   * its own start, would take a start that commit makes for one not made (docs/decisions/0011-store-faults.md).
   */
  offeredBefore?: boolean;
  attempt: AttemptRecord;
  outcome: AttemptOutcome;
  /** RFC 3339. */
  now: string;
}

/**
 * {@link finishAndStartNext} inside the transaction `trx` (the statements of SQLite's form on either store): the
 * delivery worker runs it in the turn's shared transaction on SQLite (docs/decisions/0051-turn-groups.md).
 * @returns as {@link finishAndStartNext}.
 * @throws RangeError when `input.now` is not a time; the store's error.
 */
export async function finishAttemptIn(trx: Transaction<Database>, input: FinishInput): Promise<FinishResult> {
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
  // Built only for the outcomes that use it (a builder's tree was 1 % of a delivery burst's CPU when made for
  // every delivered attempt too).
  const update = () =>
    trx
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
      result = await update()
        .set(extended(base, { run_at: outcome.runAt }))
        .executeTakeFirst();
      break;
    case 'failed':
      result = await update()
        .set(extended(base, { status: 'failed' }))
        .executeTakeFirst();
      break;
    case 'gone': {
      // Tried again at once unless the lane still has the URL that answered 410: the delivery's claim ended first,
      // then the lane's row is read locked (after this delivery's row, the order of every 410's record), so a URL
      // change committing meanwhile is seen (docs/decisions/0035-webhook-endpoints.md).
      result = await update()
        .set(extended(base, { run_at: outcome.runAt ?? now }))
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) break;
      const delivery = trx
        .updateTable('webhook_deliveries')
        .where('event_id', '=', eventId)
        .where('endpoint_id', '=', endpointId)
        .where('status', '=', 'pending');
      if (!(await laneStillAt(trx, input.instanceId, endpointId, outcome))) {
        // The old URL's answer says nothing of the new one: the attempt is not counted against it.
        await delivery.set((eb) => ({ attempts: eb('attempts', '-', 1) })).execute();
        break;
      }
      await delivery.set({ status: 'failed' }).execute();
      if (endpointId !== '') {
        // An endpoint's 410 disables that endpoint only (docs/decisions/0035-webhook-endpoints.md).
        await trx
          .updateTable('webhook_endpoints')
          .set({ enabled: 0, disabled_at: now, disabled_reason: outcome.reason, updated_at: now })
          .where('id', '=', endpointId)
          .execute();
        await failLane(trx, input, endpointId, `endpoint disabled: ${outcome.reason}`, now);
      } else {
        await trx
          .updateTable('webhook_state')
          .set({ disabled_at: now, disabled_reason: outcome.reason })
          .where('instance_id', '=', input.instanceId)
          .execute();
        await failLane(trx, input, '', `webhook disabled: ${outcome.reason}`, now);
      }
      break;
    }
  }
  const applied = result.numUpdatedRows > 0n;
  let nextStarted = false;
  if (input.next !== undefined && outcome.kind === 'delivered') {
    // Not applied: the claim was taken over, or an earlier try of this record committed before its answer was
    // lost; then the next delivery's attempt row says whether that try started it.
    nextStarted =
      applied && input.nextCheckOnly !== true
        ? await startNext(trx, input.next, workerId, now)
        : (await ATTEMPT_EXISTS.run(trx, { id: input.next.attemptId })).rows.length > 0;
  }
  return { applied, nextStarted };
}

/**
 * Whether the lane of `instanceId` and `endpointId` (`''`: the default webhook) still sends to the URL a 410 came
 * from (`gone.url` as shown, `gone.urlSealed`). Reads the lane's row locked on PostgreSQL (`for no key update`: a
 * change committing meanwhile is waited for and read), so no URL change commits between this answer and the lane's
 * disabling; the lock does not conflict with the key-share locks the recorder's inserts take on the instance's row
 * through their foreign keys, so it cannot close a cycle with a recording transaction.
 * False when the row is gone (the endpoint deleted, the webhook cleared).
 * @throws the store's error.
 */
async function laneStillAt(
  trx: Transaction<Database>,
  instanceId: string,
  endpointId: string,
  gone: Extract<AttemptOutcome, { kind: 'gone' }>,
): Promise<boolean> {
  const locked = isPostgres(trx);
  if (endpointId === '') {
    const query = trx.selectFrom('instances').select('webhook_url').where('id', '=', instanceId);
    const row = await (locked ? query.forNoKeyUpdate() : query).executeTakeFirst();
    return row !== undefined && row.webhook_url === gone.url;
  }
  const query = trx
    .selectFrom('webhook_endpoints')
    .select(['url', 'url_sealed'])
    .where('id', '=', endpointId)
    .where('instance_id', '=', instanceId);
  const row = await (locked ? query.forNoKeyUpdate() : query).executeTakeFirst();
  return row !== undefined && row.url === gone.url && (row.url_sealed ?? null) === gone.urlSealed;
}

/**
 * Fails the pending deliveries of a lane whose receiver answered 410 (docs/decisions/0005-outbox-and-delivery.md):
 * those not claimed, and the rest of this claim's lane batch (docs/decisions/0048-lane-batches.md), locked but not
 * started (no attempt counted or logged). A delivery another worker holds is left to it, and so is one of this
 * batch whose request is in flight (a lane window, docs/decisions/0050-lane-windows.md): its own record settles it.
 */
async function failLane(
  trx: Transaction<Database>,
  input: FinishInput,
  endpointId: string,
  lastError: string,
  now: number,
): Promise<void> {
  await failGoneLeftovers(trx, input.instanceId, endpointId, lastError, now);
  await trx
    .updateTable('webhook_deliveries')
    .where('instance_id', '=', input.instanceId)
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .set({ status: 'failed', last_error: lastError, updated_at: now, locked_by: null, locked_at: null })
    .where('locked_by', '=', input.workerId)
    .where('locked_at', '=', input.lockedAt)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('webhook_attempts as a')
            .select('a.id')
            .whereRef('a.event_id', '=', 'webhook_deliveries.event_id')
            .whereRef('a.endpoint_id', '=', 'webhook_deliveries.endpoint_id')
            .where('a.finished_at', 'is', null),
        ),
      ),
    )
    .execute();
}

/**
 * Fails, with `reason`, the pending deliveries of a lane no worker holds (docs/decisions/0035-webhook-endpoints.md):
 * the first half of a 410's lane failure (`failLane`), and again before a lane a 410 disabled is enabled again
 * (`POST /v1/webhook` for the default webhook, `endpointId` `''`; `PATCH` with `enabled: true` for an endpoint). The
 * 410 failed the lane's deliveries it saw; a recording transaction that read the routing before the 410 committed can
 * still queue one after it, and enabling the lane must not send that one where the receiver said it is gone. Nothing
 * is queued to a disabled lane otherwise, so these are only such leftovers. A delivery a worker holds is left to its
 * own record. When enabling, call it in the transaction that enables the lane, before it writes the lane's row. A
 * 410's record locks its own delivery, the lane's row, then the lane's other deliveries: on PostgreSQL, an enable
 * running into a second 410 of the same lane at that instant (a lane window of two or more) can end in a deadlock,
 * which fails the enable's request (500, safe to retry).
 * Returns how many it failed.
 */
export async function failGoneLeftovers(
  trx: Transaction<Database>,
  instanceId: string,
  endpointId: string,
  reason: string,
  now: number,
): Promise<number> {
  const result = await trx
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', last_error: reason, updated_at: now })
    .where('instance_id', '=', instanceId)
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .where('locked_by', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
