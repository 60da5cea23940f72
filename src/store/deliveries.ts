import { type Insertable, type Kysely, PostgresAdapter, type Transaction } from 'kysely';
import { extended } from '../domain/objects.ts';
import type { ROWS_PER_INSERT } from './compiled.ts';
import { type RowSetWrites, rowSetInsert } from './row-sets.ts';
import type { Database } from './schema.ts';
import type { WebhookDeliveriesTable } from './schema-webhooks.ts';
import { toMs } from './times.ts';
import { runWriteGroup } from './write-groups.ts';

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
 * Queues the deliveries of events (inside the transaction that records them): one statement on PostgreSQL, at most
 * {@link ROWS_PER_INSERT} rows a statement on SQLite (src/store/row-sets.ts).
 * @throws RangeError when a delivery's `now` is not a time.
 */
export async function insertDeliveries(
  trx: Transaction<Database>,
  deliveries: readonly NewDelivery[],
): Promise<void> {
  await runWriteGroup(trx, [insertDeliveriesWrites(deliveries)]);
}

/**
 * The statements {@link insertDeliveries} runs, not run (to write them with their events,
 * src/store/write-groups.ts). Errors as {@link insertDeliveries}.
 */
export function insertDeliveriesWrites(
  deliveries: readonly NewDelivery[],
): RowSetWrites<Insertable<WebhookDeliveriesTable>> {
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
  return { statement: INSERT_DELIVERIES, rows };
}

/** Delivery rows (src/store/row-sets.ts). */
const INSERT_DELIVERIES = rowSetInsert<'webhook_deliveries', Insertable<WebhookDeliveriesTable>>(
  'webhook_deliveries',
  {
    fields: {
      event_id: true,
      endpoint_id: true,
      instance_id: true,
      sequence: true,
      status: true,
      attempts: true,
      max_attempts: true,
      run_at: true,
      locked_by: true,
      locked_at: true,
      last_error: true,
      last_status: true,
      delivered_at: true,
      created_at: true,
      updated_at: true,
    },
  },
);

/**
 * Gives claims of `workerId` back (shutdown: attempts still in flight after the grace period), so another process
 * retries them at once instead of after the stale timeout. Only rows this worker holds are touched. The attempts
 * stay counted: each was started, and its attempt row is marked abandoned by the next claim. `deliveries` (event
 * id and endpoint id, `''` for the default webhook) narrows it; omitted: every claim of the worker, found through the
 * in-flight index, which holds the claimed rows only.
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
    .where('locked_by', '=', workerId)
    // Implies the in-flight index's predicate: the claimed rows are read from it, not the whole table
    // (docs/decisions/0061-claimed-delivery-index.md).
    .where('locked_at', 'is not', null);
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
    // PostgreSQL: the event row is locked until the commit, so the retention job (webhook-log.ts
    // `pruneWebhookLog`) either deleted it before (not found here) or waits and then sees the delivery pending.
    const event = await trx
      .selectFrom('webhook_events')
      .select(['id', 'sequence'])
      .where('id', '=', input.eventId)
      .where('instance_id', '=', input.instanceId)
      .$if(trx.getExecutor().adapter instanceof PostgresAdapter, (q) => q.forKeyShare())
      .executeTakeFirst();
    if (!event) return 'not-found';
    // PostgreSQL: the delivery row is read locked, so a claim or a lane batch's start holding it (its attempt row
    // written in the same transaction) is waited for; the update below, a statement of its own, then reads that
    // attempt row and answers in-flight. Read unlocked, the update waited for the row alone and judged the open
    // attempt from its snapshot taken before that commit: it queued a delivery in flight, which went out twice.
    const existing = await trx
      .selectFrom('webhook_deliveries')
      .select(['locked_at', 'status'])
      .where('event_id', '=', input.eventId)
      .where('endpoint_id', '=', endpointId)
      .$if(trx.getExecutor().adapter instanceof PostgresAdapter, (q) => q.forUpdate())
      .executeTakeFirst();
    const now = toMs(input.now);
    // A delivery queued afresh; the previous round's outcome is cleared: a pending row must not show it (its
    // attempts rows stay as history).
    const fresh = {
      status: 'pending',
      attempts: 0,
      max_attempts: input.maxAttempts,
      run_at: input.runAt,
      locked_by: null,
      locked_at: null,
      last_error: null,
      last_status: null,
      delivered_at: null,
      updated_at: now,
    };
    if (!existing) {
      if (endpointId !== '') return 'not-found';
      // Another redelivery of the same event may insert the row at the same time (PostgreSQL: both found none):
      // the second insert then does nothing, and the update below applies to the row the first one queued.
      const inserted = await trx
        .insertInto('webhook_deliveries')
        .values(
          extended(fresh, {
            event_id: input.eventId,
            endpoint_id: '',
            instance_id: input.instanceId,
            sequence: Number(event.sequence),
            created_at: now,
          }),
        )
        .onConflict((oc) => oc.columns(['event_id', 'endpoint_id']).doNothing())
        .executeTakeFirst();
      if ((inserted.numInsertedOrUpdatedRows ?? 0n) > 0n) return 'queued';
    }
    const result = await trx
      .updateTable('webhook_deliveries')
      .set(fresh)
      .where('event_id', '=', input.eventId)
      .where('endpoint_id', '=', endpointId)
      // Locked but not started (the rest of a lane batch, docs/decisions/0048-lane-batches.md: no open attempt row)
      // is queued again too: the batch then gives it back instead of starting it.
      .where((eb) =>
        eb.or([
          eb('locked_at', 'is', null),
          eb('locked_at', '<', input.staleBefore),
          eb.not(
            eb.exists(
              eb
                .selectFrom('webhook_attempts as a')
                .select('a.id')
                .where('a.event_id', '=', input.eventId)
                .where('a.endpoint_id', '=', endpointId)
                .where('a.finished_at', 'is', null),
            ),
          ),
        ]),
      )
      .executeTakeFirst();
    return result.numUpdatedRows > 0n ? 'queued' : 'in-flight';
  });
}
