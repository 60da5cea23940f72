import {
  type ExpressionBuilder,
  type Kysely,
  PostgresAdapter,
  type Selectable,
  type Transaction,
} from 'kysely';
import type { Database } from './schema.ts';
import type { WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEventsTable } from './schema-webhooks.ts';
import { toIso, toMs } from './times.ts';
import type { NewWebhookEvent } from './webhook-events.ts';

/**
 * The delivery log's store (docs/decisions/0005-outbox-and-delivery.md `GET /v1/webhook/deliveries`): each event of
 * an instance with its delivery and attempts, read in one snapshot, and the pruning of old events. The event rows
 * themselves are written by `webhook-events.ts`.
 */

/** Status of an event in the delivery log: its delivery's status, or `unsent` when none was queued. */
export type LogStatus = 'pending' | 'delivered' | 'failed' | 'unsent';
/** Every {@link LogStatus}, for validating a filter. */
export const LOG_STATUSES: readonly LogStatus[] = ['pending', 'delivered', 'failed', 'unsent'];

/**
 * One event of the delivery log with its delivery row (absent when unsent) and its attempts, oldest first.
 * `createdAt` is RFC 3339; the delivery's and the attempts' times are their columns' epoch ms.
 */
export interface LogEntry extends NewWebhookEvent {
  delivery: Pick<
    WebhookDeliveriesTable,
    | 'status'
    | 'attempts'
    | 'max_attempts'
    | 'run_at'
    | 'locked_at'
    | 'last_error'
    | 'last_status'
    | 'delivered_at'
  > | null;
  attempts: Selectable<WebhookAttemptsTable>[];
}

/** A page of the delivery log query. */
export interface LogQuery {
  status?: LogStatus;
  /** Page size (≥ 1). */
  limit: number;
  /** Only events with a smaller sequence (the cursor of the previous page). */
  beforeSequence?: number;
  /** Only this event. */
  eventId?: string;
  /**
   * The endpoint whose deliveries are shown (docs/decisions/0035-webhook-endpoints.md); omitted or `''`: the default
   * webhook's.
   */
  endpointId?: string;
  /** Only events of these types (docs/decisions/0018-webhook-events-and-payloads.md); omitted: every type. */
  types?: readonly string[];
}

/**
 * Events of `instanceId`, newest (highest sequence) first, with their delivery and attempts
 * (docs/decisions/0005-outbox-and-delivery.md `GET /v1/webhook/deliveries`). Returns at most `limit` entries.
 *
 * The two reads (events with deliveries, then their attempts) share one transaction so they see one snapshot:
 * an attempt that finishes meanwhile (`finishAttempt` completes the attempt row and updates the delivery row
 * in one commit) shows either wholly or not at all, never as a finished attempt beside a delivery row that
 * does not know of it. PostgreSQL: `REPEATABLE READ, READ ONLY` (the snapshot is taken at the first read; a
 * read-only transaction cannot fail with a serialisation error). SQLite: the transaction holds the process's
 * one connection, keeping this process's writers out between the reads, and in WAL mode a read transaction
 * sees one snapshot even while other processes write.
 */
export async function listLog(
  db: Kysely<Database>,
  instanceId: string,
  query: LogQuery,
): Promise<LogEntry[]> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute((trx) => readLog(trx, instanceId, query));
}

/** The reads of {@link listLog}, inside its transaction. */
async function readLog(trx: Transaction<Database>, instanceId: string, query: LogQuery): Promise<LogEntry[]> {
  let select = trx
    .selectFrom('webhook_events as e')
    .leftJoin('webhook_deliveries as d', (join) =>
      join.onRef('d.event_id', '=', 'e.id').on('d.endpoint_id', '=', query.endpointId ?? ''),
    )
    .select([
      'e.id',
      'e.instance_id',
      'e.sequence',
      'e.type',
      'e.payload',
      'e.skip_reason',
      'e.created_at',
      'd.event_id as d_event_id',
      'd.status',
      'd.attempts',
      'd.max_attempts',
      'd.run_at',
      'd.locked_at',
      'd.last_error',
      'd.last_status',
      'd.delivered_at',
    ])
    .where('e.instance_id', '=', instanceId);
  if (query.eventId !== undefined) select = select.where('e.id', '=', query.eventId);
  // An endpoint's log lists only the events queued for it.
  if (query.endpointId !== undefined && query.endpointId !== '')
    select = select.where('d.event_id', 'is not', null);
  if (query.beforeSequence !== undefined) select = select.where('e.sequence', '<', query.beforeSequence);
  if (query.types !== undefined && query.types.length > 0) select = select.where('e.type', 'in', query.types);
  let newestFirst: 'e.sequence' | 'd.sequence' = 'e.sequence';
  if (query.status === 'unsent') select = select.where('d.event_id', 'is', null);
  else if (query.status !== undefined) {
    // Read from the lane's deliveries in that status, newest first (`webhook_deliveries_instance`: instance,
    // endpoint, status, sequence), so a page costs its own rows whatever the instance's history
    // (docs/decisions/0061-claimed-delivery-index.md). A delivery's `sequence` is its event's.
    select = select
      .where('d.instance_id', '=', instanceId)
      .where('d.endpoint_id', '=', query.endpointId ?? '')
      .where('d.status', '=', query.status);
    if (query.beforeSequence !== undefined) select = select.where('d.sequence', '<', query.beforeSequence);
    newestFirst = 'd.sequence';
  }
  const rows = await select.orderBy(newestFirst, 'desc').limit(query.limit).execute();
  const ids = rows.map((row) => row.id);
  const attempts =
    ids.length === 0
      ? []
      : await trx
          .selectFrom('webhook_attempts')
          .selectAll()
          .where('event_id', 'in', ids)
          .where('endpoint_id', '=', query.endpointId ?? '')
          .orderBy('event_id')
          .orderBy('number')
          .execute();
  const byEvent = new Map<string, Selectable<WebhookAttemptsTable>[]>();
  for (const attempt of attempts) {
    const list = byEvent.get(attempt.event_id) ?? [];
    list.push(attempt);
    byEvent.set(attempt.event_id, list);
  }
  return rows.map((row) => ({
    id: row.id,
    instanceId: row.instance_id,
    sequence: Number(row.sequence),
    type: row.type,
    payload: row.payload,
    // Why the default webhook did not queue the event: nothing to say in an endpoint's log, where every entry was
    // queued (docs/decisions/0035-webhook-endpoints.md).
    skipReason: query.endpointId === undefined || query.endpointId === '' ? row.skip_reason : null,
    createdAt: toIso(row.created_at),
    delivery:
      row.d_event_id === null || row.status === null
        ? null
        : {
            status: row.status,
            attempts: row.attempts ?? 0,
            max_attempts: row.max_attempts ?? 0,
            run_at: Number(row.run_at),
            locked_at: row.locked_at === null ? null : Number(row.locked_at),
            last_error: row.last_error,
            last_status: row.last_status,
            delivered_at: row.delivered_at === null ? null : Number(row.delivered_at),
          },
    attempts: byEvent.get(row.id) ?? [],
  }));
}

/**
 * Deletes the deliveries of up to `limit` endpoints that no longer exist (an extra endpoint's lane, never the
 * instance's default one, `endpoint_id` ''), whatever their status, as deleting the endpoint does. A recording
 * transaction whose routing read came just before an endpoint's deletion committed can still queue to it
 * (webhook-endpoints.ts `deleteEndpoint`); no claim walks such a lane (lanes are found from the endpoints), so without
 * this its pending deliveries would keep their events from being pruned for good. Run by the retention job before it
 * prunes. @returns how many endpoints' deliveries were deleted.
 */
export async function deleteOrphanDeliveries(db: Kysely<Database>, limit: number): Promise<number> {
  const lanes = await db
    .selectFrom('webhook_deliveries as d')
    .select(['d.instance_id', 'd.endpoint_id'])
    .distinct()
    .where('d.endpoint_id', '<>', '')
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('webhook_endpoints as w')
            .select('w.id')
            .whereRef('w.id', '=', 'd.endpoint_id')
            .whereRef('w.instance_id', '=', 'd.instance_id'),
        ),
      ),
    )
    .limit(limit)
    .execute();
  for (const lane of lanes) {
    await db
      .deleteFrom('webhook_deliveries')
      .where('instance_id', '=', lane.instance_id)
      .where('endpoint_id', '=', lane.endpoint_id)
      .execute();
  }
  return lanes.length;
}

/**
 * Deletes up to `limit` events created before `before` (RFC 3339) whose delivery is over: delivered, failed or
 * never queued. They leave both the delivery log and the event log (docs/decisions/0030-event-log.md: the caller
 * passes a time older than both retentions). Their delivery rows and attempts go with them (foreign keys cascade).
 * An event with a pending delivery is kept whatever its age, also one queued again (`requeueDelivery`) while this
 * runs: the old events are locked first (PostgreSQL, skipping those a redelivery or another node's prune holds;
 * SQLite runs the transaction alone), and the delete tests their deliveries again after the locks were taken, so a
 * redelivery either committed before (its event is kept) or finds its event gone (`not-found`).
 * @returns how many events were chosen (`chosen`: `limit` when more may be left) and how many of them deleted
 *   (`deleted`: fewer when the re-check found a delivery queued again meanwhile).
 * @throws RangeError when `before` is not a time.
 */
export async function pruneWebhookLog(
  db: Kysely<Database>,
  before: string,
  limit: number,
): Promise<{ chosen: number; deleted: number }> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const noPendingDelivery = (eb: ExpressionBuilder<Database & { e: WebhookEventsTable }, 'e'>) =>
    eb.not(
      eb.exists(
        eb
          .selectFrom('webhook_deliveries as d')
          .select('d.event_id')
          .whereRef('d.event_id', '=', 'e.id')
          .where('d.status', '=', 'pending'),
      ),
    );
  return db.transaction().execute(async (trx) => {
    const old = await trx
      .selectFrom('webhook_events as e')
      .select('e.id')
      .where('e.created_at', '<', toMs(before))
      .where(noPendingDelivery)
      .limit(limit)
      .$if(postgres, (q) => q.forUpdate('e').skipLocked())
      .execute();
    if (old.length === 0) return { chosen: 0, deleted: 0 };
    const ids = old.map((row) => row.id);
    // A new statement (PostgreSQL: a new snapshot, taken once the rows are locked) sees a redelivery that
    // committed since the select.
    const deleted = await trx
      .deleteFrom('webhook_events as e')
      .where('e.id', 'in', ids)
      .where(noPendingDelivery)
      .executeTakeFirst();
    return { chosen: old.length, deleted: Number(deleted.numDeletedRows) };
  });
}
