import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import { BoundedMap } from '../domain/bounded-map.ts';
import type { Instance } from '../domain/instance.ts';
import { compiledStatement } from './compiled.ts';
import { type InstanceColumns, toInstance } from './instances.ts';
import type { Database, WebhookEndpointsTable } from './schema.ts';
import { toIso } from './times.ts';
import { type EndpointRecord, toEndpointRecord } from './webhook-endpoints.ts';

/**
 * What routes an instance's events to their receivers (docs/decisions/0035-webhook-endpoints.md): the instance's
 * row (default webhook URL, subscription) and every one of its extra endpoints, enabled or not, oldest first.
 */
export interface InstanceRouting {
  instance: Instance;
  endpoints: EndpointRecord[];
}

/** One row of the join: the instance's columns, then one endpoint's (all null when it has none). */
type RoutingRow = InstanceColumns & { routing_version: number | string } & {
  [K in keyof WebhookEndpointsTable as `endpoint_${K}`]: WebhookEndpointsTable[K] | null;
};

/** The endpoint columns of the join, each under its `endpoint_` name. */
const ENDPOINT_COLUMNS = [
  'e.id as endpoint_id',
  'e.instance_id as endpoint_instance_id',
  'e.url as endpoint_url',
  'e.events as endpoint_events',
  'e.description as endpoint_description',
  'e.secret as endpoint_secret',
  'e.url_sealed as endpoint_url_sealed',
  'e.enabled as endpoint_enabled',
  'e.disabled_at as endpoint_disabled_at',
  'e.disabled_reason as endpoint_disabled_reason',
  'e.created_at as endpoint_created_at',
  'e.updated_at as endpoint_updated_at',
] as const;

const GET_ROUTING = compiledStatement<{ id: string }, RoutingRow>((db, arg) =>
  db
    .selectFrom('instances as i')
    .leftJoin('webhook_endpoints as e', 'e.instance_id', 'i.id')
    .selectAll('i')
    .select(ENDPOINT_COLUMNS)
    .where('i.id', '=', arg('id'))
    .orderBy('e.created_at')
    .orderBy('e.id'),
);

/** What {@link ADVANCE} answers: the webhook state after the advance and the instance's routing version. */
interface AdvanceRow {
  last_sequence: number | string;
  disabled_at: number | null;
  disabled_reason: string | null;
  routing_version: number | string;
}

/**
 * Advances the instance's sequence by `count` when the instance exists (an insert from its row, so nothing is
 * written for an unknown one), and answers the state's new values with the instance's routing version, in one
 * statement on both dialects. The upsert locks the state row to the transaction's end.
 */
const ADVANCE = compiledStatement<{ id: string; count: number }, AdvanceRow>((db, arg) =>
  db
    .insertInto('webhook_state')
    .columns(['instance_id', 'last_sequence'])
    .expression((eb) =>
      eb
        .selectFrom('instances')
        .select(['id', sql<number>`cast(${arg('count')} as bigint)`.as('last_sequence')])
        .where('id', '=', arg('id')),
    )
    .onConflict((oc) =>
      oc
        .column('instance_id')
        .doUpdateSet({ last_sequence: sql<number>`webhook_state.last_sequence + ${arg('count')}` }),
    )
    .returning((eb) => [
      'last_sequence',
      'disabled_at',
      'disabled_reason',
      eb
        .selectFrom('instances')
        .select('routing_version')
        .whereRef('instances.id', '=', 'webhook_state.instance_id')
        .as('routing_version'),
    ]),
);

/** The endpoint columns of a join row, or undefined when the row carries none (an instance without endpoints). */
function endpointOf(row: RoutingRow): Selectable<WebhookEndpointsTable> | undefined {
  if (
    row.endpoint_id === null ||
    row.endpoint_instance_id === null ||
    row.endpoint_url === null ||
    row.endpoint_events === null ||
    row.endpoint_secret === null ||
    row.endpoint_enabled === null ||
    row.endpoint_created_at === null ||
    row.endpoint_updated_at === null
  )
    return undefined;
  return {
    id: row.endpoint_id,
    instance_id: row.endpoint_instance_id,
    url: row.endpoint_url,
    events: row.endpoint_events,
    description: row.endpoint_description,
    secret: row.endpoint_secret,
    url_sealed: row.endpoint_url_sealed,
    enabled: row.endpoint_enabled,
    disabled_at: row.endpoint_disabled_at,
    disabled_reason: row.endpoint_disabled_reason,
    created_at: row.endpoint_created_at,
    updated_at: row.endpoint_updated_at,
  };
}

/**
 * The instance `id` and its endpoints in one statement (a left join, compiled once per store): the recorder reads
 * them for every transaction that writes webhook events, and on PostgreSQL each statement is a round trip.
 * → undefined when no such instance exists.
 * @throws what the store throws (`store_unavailable` on a fault, docs/decisions/0011-store-faults.md).
 */
export async function getInstanceRouting(
  db: Kysely<Database>,
  id: string,
): Promise<InstanceRouting | undefined> {
  const { rows } = await GET_ROUTING.run(db, { id });
  return rows.length === 0 ? undefined : routingOf(rows);
}

/** The routing of the join's `rows` (at least one: the instance's columns repeat on each). */
function routingOf(rows: readonly RoutingRow[]): InstanceRouting {
  const endpoints: EndpointRecord[] = [];
  for (const row of rows) {
    const endpoint = endpointOf(row);
    if (endpoint) endpoints.push(toEndpointRecord(endpoint));
  }
  return { instance: toInstance(rows[0] as RoutingRow), endpoints };
}

/** An instance's routing and the sequence numbers taken for its events, see {@link routeAndAdvance}. */
export interface AdvancedRouting extends InstanceRouting {
  /** The last sequence number taken: the events get `last - count + 1` to `last`. */
  last: number;
  /** When a 410 disabled the default webhook (RFC 3339), and why; null when enabled. */
  disabledAt: string | null;
  disabledReason: string | null;
}

/** The routing a process last read for an instance, and the instance's routing version it was read at. */
interface KnownRouting {
  version: number;
  routing: InstanceRouting;
}

/** Instances whose routing each store's process keeps (least recently used dropped first). */
export const KNOWN_ROUTINGS = 10_000;

/** The routings kept per store: by its dialect adapter, one per store and shared by its transactions. */
const knownByStore = new WeakMap<object, BoundedMap<string, KnownRouting>>();

function knownOf(db: Kysely<Database>): BoundedMap<string, KnownRouting> {
  const adapter = db.getExecutor().adapter;
  let known = knownByStore.get(adapter);
  if (!known) {
    known = new BoundedMap(KNOWN_ROUTINGS);
    knownByStore.set(adapter, known);
  }
  return known;
}

/**
 * Takes `count` sequence numbers for the webhook events of instance `id` and answers what routes them
 * (docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0035-webhook-endpoints.md), inside the recorder's
 * transaction: the state row stays locked until its commit, so the instance's events are numbered in commit order.
 * One statement takes the numbers and answers the instance's routing version; the routing itself is read again
 * only when that version differs from the one this process last read it at (docs/decisions/0065-routing-version.md:
 * the store raises the version in the transaction of every change to the instance or its endpoints, so an equal
 * version means the routing the statement would have read is the one kept). → undefined, and no number taken,
 * when no such instance exists.
 * @throws what the store throws (`store_unavailable` on a fault, docs/decisions/0011-store-faults.md).
 */
export async function routeAndAdvance(
  trx: Transaction<Database>,
  id: string,
  count: number,
): Promise<AdvancedRouting | undefined> {
  const [state] = (await ADVANCE.run(trx, { id, count })).rows;
  if (!state) return undefined;
  const known = knownOf(trx);
  let routing = known.use(id);
  if (routing?.version !== Number(state.routing_version)) {
    const { rows } = await GET_ROUTING.run(trx, { id });
    const [first] = rows;
    // Gone since the advance (deleted by another transaction on PostgreSQL): nothing to route by.
    if (!first) return undefined;
    routing = { version: Number(first.routing_version), routing: routingOf(rows) };
    known.set(id, routing);
  }
  return {
    ...routing.routing,
    last: Number(state.last_sequence),
    disabledAt: toIso(state.disabled_at),
    disabledReason: state.disabled_reason,
  };
}
