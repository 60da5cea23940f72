import {
  type CompiledQuery,
  type Insertable,
  type Kysely,
  type Selectable,
  sql,
  type Transaction,
} from 'kysely';
import { chunksOf, compiledListStatement, compiledStatement, ROWS_PER_INSERT } from './compiled.ts';
import type { Database, WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEventsTable } from './schema.ts';
import { toIso, toMs } from './times.ts';
import { runWriteGroup } from './write-groups.ts';

/**
 * Webhook event rows and per-instance webhook state (docs/decisions/0005-outbox-and-delivery.md): sequence numbers,
 * the 410 disabling, and the delivery log's reads. The delivery queue itself is in `deliveries.ts`.
 */

/** Per-instance webhook state; `disabledAt` (RFC 3339) is set when a 410 Gone disabled the webhook. */
export interface WebhookState {
  lastSequence: number;
  disabledAt: string | null;
  disabledReason: string | null;
}

/**
 * Hands out the next `count` (≥ 1) `sequence` numbers of `instanceId` (1, 2, 3, … per instance,
 * docs/decisions/0005-outbox-and-delivery.md): → the last of them (the batch holds `last - count + 1` … `last`) with
 * the webhook's disabled state. Upserts the state row; on PostgreSQL its row lock serialises concurrent writers of
 * the same instance until their transactions end, so numbers are unique and gap-free even across processes. Must
 * run inside the transaction that writes the events.
 */
export async function advanceSequence(
  trx: Transaction<Database>,
  instanceId: string,
  count: number,
): Promise<{ last: number; disabledAt: string | null; disabledReason: string | null }> {
  const { rows } = await ADVANCE_SEQUENCE.run(trx, { instanceId, count });
  const row = rows[0];
  if (!row) throw new Error('the sequence upsert returned no row');
  return {
    last: Number(row.last_sequence),
    disabledAt: toIso(row.disabled_at),
    disabledReason: row.disabled_reason,
  };
}

const ADVANCE_SEQUENCE = compiledStatement<
  { instanceId: string; count: number },
  { last_sequence: number; disabled_at: number | null; disabled_reason: string | null }
>((db, arg) =>
  db
    .insertInto('webhook_state')
    .values({
      instance_id: arg('instanceId'),
      last_sequence: arg('count'),
      disabled_at: null,
      disabled_reason: null,
    })
    .onConflict((oc) =>
      oc
        .column('instance_id')
        .doUpdateSet({ last_sequence: sql<number>`webhook_state.last_sequence + ${arg('count')}` }),
    )
    .returning(['last_sequence', 'disabled_at', 'disabled_reason']),
);

/** The webhook state of an instance; defaults (nothing sent yet, enabled) when it has no row. */
export async function getWebhookState(db: Kysely<Database>, instanceId: string): Promise<WebhookState> {
  const row = await db
    .selectFrom('webhook_state')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  return {
    lastSequence: row ? Number(row.last_sequence) : 0,
    disabledAt: toIso(row?.disabled_at ?? null),
    disabledReason: row?.disabled_reason ?? null,
  };
}

/** Clears a 410 disabling (`POST /v1/webhook` sets the URL again, docs/decisions/0005-outbox-and-delivery.md). */
export async function enableWebhook(db: Kysely<Database>, instanceId: string): Promise<void> {
  await db
    .updateTable('webhook_state')
    .set({ disabled_at: null, disabled_reason: null })
    .where('instance_id', '=', instanceId)
    .execute();
}

/** A new event row (see `WebhookEventsTable`); `createdAt` is RFC 3339. */
export interface NewWebhookEvent {
  id: string;
  instanceId: string;
  sequence: number;
  type: string;
  /** Exact body text. */
  payload: string;
  skipReason: string | null;
  createdAt: string;
}

/**
 * Inserts event rows inside the recording transaction (docs/decisions/0005-outbox-and-delivery.md outbox), at most
 * {@link ROWS_PER_INSERT} a statement.
 * @throws RangeError when an event's `createdAt` is not a time.
 */
export async function insertWebhookEvents(
  trx: Transaction<Database>,
  events: readonly NewWebhookEvent[],
): Promise<void> {
  await runWriteGroup(trx, [insertWebhookEventsWrites(trx, events)]);
}

/**
 * The statements {@link insertWebhookEvents} runs, not run (to write them with the events' deliveries,
 * src/store/write-groups.ts). Errors as {@link insertWebhookEvents}.
 */
export function insertWebhookEventsWrites(
  db: Kysely<Database>,
  events: readonly NewWebhookEvent[],
): CompiledQuery[] {
  const rows = events.map((event) => ({
    id: event.id,
    instance_id: event.instanceId,
    sequence: event.sequence,
    type: event.type,
    payload: event.payload,
    skip_reason: event.skipReason,
    created_at: toMs(event.createdAt),
  }));
  return chunksOf(rows).map((chunk) => INSERT_WEBHOOK_EVENTS.query(db, {}, chunk));
}

/** Event rows (compiled per list length, src/store/compiled.ts). */
const INSERT_WEBHOOK_EVENTS = compiledListStatement<Record<never, never>, Insertable<WebhookEventsTable>>(
  {
    id: true,
    instance_id: true,
    sequence: true,
    type: true,
    payload: true,
    skip_reason: true,
    created_at: true,
  },
  (db, _arg, rows) => db.insertInto('webhook_events').values(rows),
);

/** True when `eventId` is an event of `instanceId`. */
export async function webhookEventExists(
  db: Kysely<Database>,
  instanceId: string,
  eventId: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('webhook_events')
    .select('id')
    .where('id', '=', eventId)
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  return row !== undefined;
}

/** Status of an event in the delivery log: its delivery's status, or `unsent` when none was queued. */
export type LogStatus = 'pending' | 'delivered' | 'failed' | 'unsent';
export const LOG_STATUSES: readonly LogStatus[] = ['pending', 'delivered', 'failed', 'unsent'];

/**
 * One event of the delivery log with its delivery row (absent when unsent) and its attempts, oldest first.
 * `createdAt` is RFC 3339; the delivery's and the attempts' times are their columns' epoch ms.
 */
export interface LogEntry {
  id: string;
  instanceId: string;
  sequence: number;
  type: string;
  payload: string;
  skipReason: string | null;
  createdAt: string;
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
  if (query.status === 'unsent') select = select.where('d.event_id', 'is', null);
  else if (query.status !== undefined) select = select.where('d.status', '=', query.status);
  const rows = await select.orderBy('e.sequence', 'desc').limit(query.limit).execute();
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
 * Deletes up to `limit` events created before `before` (RFC 3339) whose delivery is over: delivered, failed or
 * never queued. They leave both the delivery log and the event log (docs/decisions/0030-event-log.md: the caller
 * passes a time older than both retentions). Their delivery rows and attempts go with them (foreign keys cascade).
 * An event with a pending delivery is kept whatever its age.
 * @returns how many events were deleted.
 * @throws RangeError when `before` is not a time.
 */
export async function pruneWebhookLog(db: Kysely<Database>, before: string, limit: number): Promise<number> {
  const old = await db
    .selectFrom('webhook_events as e')
    .select('e.id')
    .where('e.created_at', '<', toMs(before))
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('webhook_deliveries as d')
            .select('d.event_id')
            .whereRef('d.event_id', '=', 'e.id')
            .where('d.status', '=', 'pending'),
        ),
      ),
    )
    .limit(limit)
    .execute();
  if (old.length === 0) return 0;
  const ids = old.map((row) => row.id);
  await db.deleteFrom('webhook_events').where('id', 'in', ids).execute();
  return ids.length;
}

/** A page of the event log query (docs/decisions/0030-event-log.md `GET /v1/events`). */
export interface EventLogQuery {
  /** Only events with a greater sequence (≥ 0). */
  after: number;
  /** Page size (≥ 1). */
  limit: number;
  /** Only events of these types; omitted or empty: every type. */
  types?: readonly string[];
}

/** One event of the event log: its sequence, its type, the exact webhook body text, and `createdAt` (RFC 3339). */
export interface EventLogRow {
  sequence: number;
  type: string;
  payload: string;
  createdAt: string;
}

/**
 * What one read of the event log saw: the matching `rows` in sequence order, and `head`, the instance's last
 * handed-out sequence in the same snapshot (0 before its first event). Every event up to `head` that will ever be
 * visible is visible in that snapshot: a sequence is handed out in the transaction that writes its event, under
 * the instance's `webhook_state` row lock ({@link nextSequence}), so events commit in sequence order.
 */
export interface EventLogRead {
  rows: EventLogRow[];
  head: number;
}

/**
 * The event log's select (no transaction): events of `instanceId` with a sequence above `query.after`, oldest first,
 * at most `query.limit`, of `query.types` only when it names some. Served by the unique index on
 * `(instance_id, sequence)` (`webhook_events_instance_sequence`, migration 0003), which gives the rows in order, so
 * a page costs the rows it reads and never a sort (test/events/event-log.test.ts checks the plan on both dialects).
 */
export function eventLogSelect(db: Kysely<Database>, instanceId: string, query: EventLogQuery) {
  let select = db
    .selectFrom('webhook_events')
    .select(['sequence', 'type', 'payload', 'created_at'])
    .where('instance_id', '=', instanceId)
    .where('sequence', '>', query.after);
  if (query.types !== undefined && query.types.length > 0) select = select.where('type', 'in', query.types);
  return select.orderBy('sequence').limit(query.limit);
}

/**
 * Events of `instanceId` with a sequence above `query.after`, oldest first, at most `query.limit`, optionally of
 * some types only (docs/decisions/0030-event-log.md; the select is {@link eventLogSelect}). The rows and the head
 * are read in one read-only transaction, so they describe one snapshot (the isolation of {@link listLog}).
 */
export async function readEventLog(
  db: Kysely<Database>,
  instanceId: string,
  query: EventLogQuery,
): Promise<EventLogRead> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const rows = await eventLogSelect(trx, instanceId, query).execute();
      const state = await trx
        .selectFrom('webhook_state')
        .select('last_sequence')
        .where('instance_id', '=', instanceId)
        .executeTakeFirst();
      return {
        rows: rows.map((row) => ({
          sequence: Number(row.sequence),
          type: row.type,
          payload: row.payload,
          createdAt: toIso(row.created_at),
        })),
        head: state ? Number(state.last_sequence) : 0,
      };
    });
}

/** The latest event of an instance: its type and when it was recorded (epoch ms). */
export interface LastEvent {
  type: string;
  at: number;
}

/**
 * The latest recorded event of each of `instanceIds` (the highest `sequence`, through the
 * `webhook_events_instance_sequence` unique index); instances without events are absent from the map.
 */
export async function lastEvents(
  db: Kysely<Database>,
  instanceIds: readonly string[],
): Promise<Map<string, LastEvent>> {
  if (instanceIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhook_events as e')
    .innerJoin(
      (eb) =>
        eb
          .selectFrom('webhook_events')
          .select(['instance_id', (b) => b.fn.max('sequence').as('last')])
          .where('instance_id', 'in', instanceIds)
          .groupBy('instance_id')
          .as('m'),
      (join) => join.onRef('m.instance_id', '=', 'e.instance_id').onRef('m.last', '=', 'e.sequence'),
    )
    .select(['e.instance_id', 'e.type', 'e.created_at'])
    .execute();
  return new Map(rows.map((row) => [row.instance_id, { type: row.type, at: Number(row.created_at) }]));
}
