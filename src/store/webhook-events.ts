import { type Insertable, type Kysely, sql, type Transaction } from 'kysely';
import type { ROWS_PER_INSERT } from './compiled.ts';
import { failGoneLeftovers } from './delivery-finish.ts';
import { readAfterLostCommit } from './lost-commits.ts';
import { type RowSetWrites, rowSetInsert } from './row-sets.ts';
import type { Database } from './schema.ts';
import type { WebhookEventsTable } from './schema-webhooks.ts';
import { toIso, toMs } from './times.ts';
import { runWriteGroup } from './write-groups.ts';

/**
 * Webhook event rows and per-instance webhook state (docs/decisions/0005-outbox-and-delivery.md): sequence numbers,
 * the 410 disabling, and the event log's reads. The delivery log's reads and pruning are in `webhook-log.ts`; the
 * delivery queue itself is in `deliveries.ts`.
 */

/** Per-instance webhook state; `disabledAt` (RFC 3339) is set when a 410 Gone disabled the webhook. */
export interface WebhookState {
  lastSequence: number;
  disabledAt: string | null;
  disabledReason: string | null;
}

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

/**
 * Clears a 410 disabling of the instance's default webhook at `now` (epoch ms; `POST /v1/webhook` sets the URL
 * again, docs/decisions/0005-outbox-and-delivery.md), first failing the deliveries that 410 left pending
 * (delivery-finish.ts `failGoneLeftovers`). Run it in the transaction that sets the URL.
 */
export async function enableWebhook(
  trx: Transaction<Database>,
  instanceId: string,
  now: number,
): Promise<void> {
  const gone = await trx
    .selectFrom('webhook_state')
    .select('disabled_reason')
    .where('instance_id', '=', instanceId)
    .where('disabled_at', 'is not', null)
    .executeTakeFirst();
  if (gone !== undefined)
    await failGoneLeftovers(trx, instanceId, '', gone.disabled_reason ?? 'receiver answered 410 Gone', now);
  // Whatever the read saw: a 410 whose record has not committed yet is waited for here, and its disabling cleared.
  await trx
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
 * Inserts event rows inside the recording transaction (docs/decisions/0005-outbox-and-delivery.md outbox): one
 * statement on PostgreSQL, at most {@link ROWS_PER_INSERT} rows a statement on SQLite (src/store/row-sets.ts).
 * @throws RangeError when an event's `createdAt` is not a time.
 */
export async function insertWebhookEvents(
  trx: Transaction<Database>,
  events: readonly NewWebhookEvent[],
): Promise<void> {
  await runWriteGroup(trx, [insertWebhookEventsWrites(events)]);
}

/**
 * The statements {@link insertWebhookEvents} runs, not run (to write them with the events' deliveries,
 * src/store/write-groups.ts). Errors as {@link insertWebhookEvents}.
 */
export function insertWebhookEventsWrites(
  events: readonly NewWebhookEvent[],
): RowSetWrites<Insertable<WebhookEventsTable>> {
  const rows = events.map((event) => ({
    id: event.id,
    instance_id: event.instanceId,
    sequence: event.sequence,
    type: event.type,
    payload: event.payload,
    skip_reason: event.skipReason,
    created_at: toMs(event.createdAt),
  }));
  return { statement: INSERT_WEBHOOK_EVENTS, rows };
}

/** Event rows (src/store/row-sets.ts). */
const INSERT_WEBHOOK_EVENTS = rowSetInsert<'webhook_events', Insertable<WebhookEventsTable>>(
  'webhook_events',
  {
    fields: {
      id: true,
      instance_id: true,
      sequence: true,
      type: true,
      payload: true,
      skip_reason: true,
      created_at: true,
    },
  },
);

/**
 * Whether event row `eventId` of instance `instanceId` was committed, asked after the commit of the transaction that
 * wrote it failed with its outcome unknown (docs/decisions/0011-store-faults.md). On PostgreSQL the read first takes
 * the instance's sequence row (`webhook_state`) as a recorder batch does, by an upsert that changes nothing, which
 * waits for a transaction still holding that row (or still inserting it) to end (`readAfterLostCommit`).
 * @throws DomainError store_unavailable when a transaction still holds the row after the wait (ask again later);
 *   the store's error.
 */
export function eventKeptAfterLostCommit(
  db: Kysely<Database>,
  instanceId: string,
  eventId: string,
): Promise<boolean> {
  return readAfterLostCommit(
    db,
    (trx) =>
      trx
        .insertInto('webhook_state')
        .columns(['instance_id', 'last_sequence'])
        .expression((eb) =>
          eb
            .selectFrom('instances')
            .select(['id', sql<number>`cast(0 as bigint)`.as('last_sequence')])
            .where('id', '=', instanceId),
        )
        .onConflict((oc) =>
          oc.column('instance_id').doUpdateSet({ last_sequence: sql<number>`webhook_state.last_sequence` }),
        )
        .execute(),
    async (reader) =>
      (await reader
        .selectFrom('webhook_events')
        .select('id')
        .where('id', '=', eventId)
        .executeTakeFirst()) !== undefined,
  );
}

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
