import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import type { Database } from './schema.ts';

/**
 * The webhook delivery queue (DESIGN D10), Graphile-Worker shape: a delivery row is due when `status` is
 * `pending` and `run_at` (epoch ms) has passed; a worker claims it by setting `locked_by`/`locked_at`, posts,
 * then records the attempt and the outcome in one transaction, conditioned on still holding the claim. A claim
 * older than the stale timeout belongs to a dead worker and may be taken over. No retry state lives in memory.
 */

/** Delivery statuses: `pending` (queued or in flight), `delivered`, `failed` (after the last retry or a 410). */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** A new delivery row, written in the recording transaction (DESIGN D10 outbox). */
export interface NewDelivery {
  eventId: string;
  instanceId: string;
  sequence: number;
  /** Attempts allowed in this round: the first try plus one per retry delay. */
  maxAttempts: number;
  /** Epoch ms when the first attempt is due. */
  runAt: number;
  /** RFC 3339. */
  now: string;
}

/** Queues the delivery of an event (inside the transaction that records it). */
export async function insertDelivery(trx: Transaction<Database>, delivery: NewDelivery): Promise<void> {
  await trx
    .insertInto('webhook_deliveries')
    .values({
      event_id: delivery.eventId,
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
      created_at: delivery.now,
      updated_at: delivery.now,
    })
    .execute();
}

/** A claimed delivery with what an attempt needs. `hmacKeySealed` is opened with the SecretBox. */
export interface ClaimedDelivery {
  eventId: string;
  instanceId: string;
  sequence: number;
  /** Attempts already made in this round (the claimed attempt is number `attempts + 1` of the round). */
  attempts: number;
  maxAttempts: number;
  /** Exact body text. */
  payload: string;
  url: string;
  hmacKeySealed: string | null;
}

/** Parameters of {@link claimDeliveries}; times in epoch ms. */
export interface ClaimOptions {
  workerId: string;
  now: number;
  /** Claims with `locked_at` before this are stale (their worker died) and may be taken over. */
  staleBefore: number;
  /** Most rows to claim (≥ 1). */
  limit: number;
}

/**
 * Claims due deliveries for `workerId` (DESIGN D10). Per instance (one webhook URL) only the due delivery
 * with the lowest `sequence` is eligible, and only while no other delivery of that instance is in flight, so
 * deliveries to one URL start in `sequence` order; a failed attempt moves its row's `run_at` into the future,
 * so later events are not blocked. Instances without a URL, or disabled by a 410, are skipped.
 * PostgreSQL: `FOR UPDATE OF d SKIP LOCKED` in a materialised CTE, so several processes share the queue;
 * SQLite: the same single `UPDATE … WHERE … IN (SELECT … LIMIT n) RETURNING` (one writer at a time).
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  const { workerId, now, staleBefore, limit } = options;
  const claimed = await db
    .with(
      (cte) => cte('due').materialized(),
      (qb) => {
        let query = qb
          .selectFrom('webhook_deliveries as d')
          .select('d.event_id')
          .where('d.status', '=', 'pending')
          .where('d.run_at', '<=', now)
          .where((eb) => eb.or([eb('d.locked_at', 'is', null), eb('d.locked_at', '<', staleBefore)]))
          .where((eb) =>
            eb.exists(
              eb
                .selectFrom('instances as i')
                .select('i.id')
                .whereRef('i.id', '=', 'd.instance_id')
                .where('i.webhook_url', 'is not', null),
            ),
          )
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_state as s')
                  .select('s.instance_id')
                  .whereRef('s.instance_id', '=', 'd.instance_id')
                  .where('s.disabled_at', 'is not', null),
              ),
            ),
          )
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_deliveries as o')
                  .select('o.event_id')
                  .whereRef('o.instance_id', '=', 'd.instance_id')
                  .where('o.status', '=', 'pending')
                  .where((inner) =>
                    inner.or([
                      // another delivery of this instance is in flight (claimed, not stale)
                      inner.and([
                        inner('o.locked_at', 'is not', null),
                        inner('o.locked_at', '>=', staleBefore),
                      ]),
                      // an earlier event of this instance is due too: it goes first
                      inner.and([
                        inner('o.run_at', '<=', now),
                        inner('o.sequence', '<', inner.ref('d.sequence')),
                      ]),
                    ]),
                  ),
              ),
            ),
          )
          .orderBy('d.run_at')
          .orderBy('d.sequence')
          .limit(limit);
        if (dialect === 'postgres') query = query.forUpdate('d').skipLocked();
        return query;
      },
    )
    .updateTable('webhook_deliveries')
    .set({ locked_by: workerId, locked_at: now })
    .where('event_id', 'in', (eb) => eb.selectFrom('due').select('due.event_id'))
    .returning(['event_id'])
    .execute();
  if (claimed.length === 0) return [];
  const rows = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .innerJoin('instances as i', 'i.id', 'd.instance_id')
    .select([
      'd.event_id',
      'd.instance_id',
      'd.sequence',
      'd.attempts',
      'd.max_attempts',
      'e.payload',
      'i.webhook_url',
      'i.hmac_key',
    ])
    .where(
      'd.event_id',
      'in',
      claimed.map((row) => row.event_id),
    )
    .where('d.locked_by', '=', workerId)
    .orderBy('d.sequence')
    .execute();
  const out: ClaimedDelivery[] = [];
  for (const row of rows) {
    if (row.webhook_url === null) {
      // The URL went away between claim and read: give the claim back untouched.
      await releaseClaims(db, workerId, [row.event_id]);
      continue;
    }
    out.push({
      eventId: row.event_id,
      instanceId: row.instance_id,
      sequence: Number(row.sequence),
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      payload: row.payload,
      url: row.webhook_url,
      hmacKeySealed: row.hmac_key,
    });
  }
  return out;
}

/** What happened on one attempt, for the attempts table. */
export interface AttemptRecord {
  url: string;
  /** RFC 3339 time the attempt started. */
  attemptedAt: string;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** First 2 KB of the response as text (NUL characters replaced), or null. */
  responseBody: string | null;
  responseTruncated: boolean;
}

/**
 * The delivery's next state after an attempt: `delivered`; `retry` at `runAt` (epoch ms); `failed` (no retries
 * left); `gone` (410: fails this delivery, disables the instance's webhook and fails its other pending ones).
 */
export type AttemptOutcome =
  | { kind: 'delivered' }
  | { kind: 'retry'; runAt: number }
  | { kind: 'failed' }
  | { kind: 'gone'; reason: string };

/**
 * Records an attempt and applies its outcome in one transaction. The attempt row is always written (it
 * happened); the delivery row changes only while `workerId` still holds the claim, so a worker whose claim was
 * taken over as stale cannot overwrite the new owner's state.
 * @returns true when the claim was still held and the outcome applied.
 */
export async function finishAttempt(
  db: Kysely<Database>,
  input: {
    eventId: string;
    instanceId: string;
    workerId: string;
    attempt: AttemptRecord;
    outcome: AttemptOutcome;
    /** RFC 3339. */
    now: string;
  },
): Promise<boolean> {
  const { eventId, workerId, attempt, outcome, now } = input;
  return db.transaction().execute(async (trx) => {
    const previous = await trx
      .selectFrom('webhook_attempts')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('event_id', '=', eventId)
      .executeTakeFirst();
    await trx
      .insertInto('webhook_attempts')
      .values({
        id: randomUUID(),
        event_id: eventId,
        number: Number(previous?.count ?? 0) + 1,
        url: attempt.url,
        worker: workerId,
        attempted_at: attempt.attemptedAt,
        status_code: attempt.statusCode,
        duration_ms: attempt.durationMs,
        error: attempt.error,
        response_body: attempt.responseBody,
        response_truncated: attempt.responseTruncated ? 1 : 0,
      })
      .execute();
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
      .where('locked_by', '=', workerId)
      .where('status', '=', 'pending');
    let result: { numUpdatedRows: bigint };
    switch (outcome.kind) {
      case 'delivered':
        result = await update
          .set((eb) => ({
            ...base,
            status: 'delivered',
            delivered_at: now,
            attempts: eb('attempts', '+', 1),
          }))
          .executeTakeFirst();
        break;
      case 'retry':
        result = await update
          .set((eb) => ({ ...base, run_at: outcome.runAt, attempts: eb('attempts', '+', 1) }))
          .executeTakeFirst();
        break;
      case 'failed':
        result = await update
          .set((eb) => ({ ...base, status: 'failed', attempts: eb('attempts', '+', 1) }))
          .executeTakeFirst();
        break;
      case 'gone':
        result = await update
          .set((eb) => ({ ...base, status: 'failed', attempts: eb('attempts', '+', 1) }))
          .executeTakeFirst();
        if (result.numUpdatedRows > 0n) {
          await trx
            .updateTable('webhook_state')
            .set({ disabled_at: now, disabled_reason: outcome.reason })
            .where('instance_id', '=', input.instanceId)
            .execute();
          await trx
            .updateTable('webhook_deliveries')
            .set({ status: 'failed', last_error: `webhook disabled: ${outcome.reason}`, updated_at: now })
            .where('instance_id', '=', input.instanceId)
            .where('status', '=', 'pending')
            .where('locked_by', 'is', null)
            .execute();
        }
        break;
    }
    return result.numUpdatedRows > 0n;
  });
}

/**
 * Gives claims of `workerId` back without an attempt (shutdown, or a claim that cannot be used): only rows this
 * worker holds are touched. `eventIds` narrows it; omitted: every claim of the worker.
 */
export async function releaseClaims(
  db: Kysely<Database>,
  workerId: string,
  eventIds?: readonly string[],
): Promise<number> {
  if (eventIds !== undefined && eventIds.length === 0) return 0;
  let query = db
    .updateTable('webhook_deliveries')
    .set({ locked_by: null, locked_at: null })
    .where('locked_by', '=', workerId);
  if (eventIds !== undefined) query = query.where('event_id', 'in', [...eventIds]);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Result of {@link requeueDelivery}. */
export type RequeueResult = 'queued' | 'in-flight' | 'not-found';

/**
 * Queues an event again (DESIGN D10 `redeliver`): a new round with `maxAttempts` attempts, due at `runAt`.
 * Creates the delivery row when the event was never queued (it was recorded without a URL or subscription).
 * @returns `not-found` when the event is not one of `instanceId`'s; `in-flight` when an attempt holds a live
 *   claim on it (not stale before `staleBefore`, epoch ms).
 */
export async function requeueDelivery(
  db: Kysely<Database>,
  input: {
    instanceId: string;
    eventId: string;
    maxAttempts: number;
    runAt: number;
    staleBefore: number;
    /** RFC 3339. */
    now: string;
  },
): Promise<RequeueResult> {
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
      .executeTakeFirst();
    if (!existing) {
      await insertDelivery(trx, {
        eventId: input.eventId,
        instanceId: input.instanceId,
        sequence: Number(event.sequence),
        maxAttempts: input.maxAttempts,
        runAt: input.runAt,
        now: input.now,
      });
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
        updated_at: input.now,
      })
      .where('event_id', '=', input.eventId)
      .where((eb) => eb.or([eb('locked_at', 'is', null), eb('locked_at', '<', input.staleBefore)]))
      .executeTakeFirst();
    return result.numUpdatedRows > 0n ? 'queued' : 'in-flight';
  });
}
