import { type Kysely, PostgresAdapter, type Selectable, sql, type Transaction } from 'kysely';
import type { Instance } from '../domain/instance.ts';
import { compiledStatement } from './compiled.ts';
import { toInstance } from './instances.ts';
import type { Database, InstancesTable, WebhookEndpointsTable } from './schema.ts';
import { toIso } from './times.ts';
import { type EndpointRecord, toEndpointRecord } from './webhook-endpoints.ts';
import { advanceSequence } from './webhook-events.ts';

/**
 * What routes an instance's events to their receivers (docs/decisions/0035-webhook-endpoints.md): the instance's
 * row (default webhook URL, subscription) and every one of its extra endpoints, enabled or not, oldest first.
 */
export interface InstanceRouting {
  instance: Instance;
  endpoints: EndpointRecord[];
}

/** One row of the join: the instance's columns, then one endpoint's (all null when it has none). */
type RoutingRow = InstancesTable & {
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

/** A join row of {@link ROUTE_AND_ADVANCE}: the routing row and the webhook state after the advance. */
type AdvancedRoutingRow = RoutingRow & {
  state_last_sequence: number | string;
  state_disabled_at: number | null;
  state_disabled_reason: string | null;
};

/**
 * PostgreSQL only (a data-modifying `WITH`): advances the instance's sequence by `count`, when the instance exists,
 * and reads its routing joined with the state's new values, in one statement.
 */
const ROUTE_AND_ADVANCE = compiledStatement<{ id: string; count: number }, AdvancedRoutingRow>((db, arg) =>
  db
    .with('s', (w) =>
      w
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
        .returning([
          'last_sequence as state_last_sequence',
          'disabled_at as state_disabled_at',
          'disabled_reason as state_disabled_reason',
        ]),
    )
    .selectFrom(['s', 'instances as i'])
    .leftJoin('webhook_endpoints as e', 'e.instance_id', 'i.id')
    .selectAll('i')
    .select(ENDPOINT_COLUMNS)
    .select(['s.state_last_sequence', 's.state_disabled_at', 's.state_disabled_reason'])
    .where('i.id', '=', arg('id'))
    .orderBy('e.created_at')
    .orderBy('e.id'),
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

/**
 * Takes `count` sequence numbers for the webhook events of instance `id` and reads what routes them
 * (docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0035-webhook-endpoints.md), inside the recorder's
 * transaction: the state row stays locked until its commit, so the instance's events are numbered in commit order.
 * On PostgreSQL one statement (a data-modifying `WITH`, docs/decisions/0056-write-groups.md), on SQLite the routing
 * read and then the sequence's upsert. → undefined, and no number taken, when no such instance exists.
 * @throws what the store throws (`store_unavailable` on a fault, docs/decisions/0011-store-faults.md).
 */
export async function routeAndAdvance(
  trx: Transaction<Database>,
  id: string,
  count: number,
): Promise<AdvancedRouting | undefined> {
  if (trx.getExecutor().adapter instanceof PostgresAdapter) {
    const { rows } = await ROUTE_AND_ADVANCE.run(trx, { id, count });
    const [first] = rows;
    if (!first) return undefined;
    return {
      ...routingOf(rows),
      last: Number(first.state_last_sequence),
      disabledAt: toIso(first.state_disabled_at),
      disabledReason: first.state_disabled_reason,
    };
  }
  const routing = await getInstanceRouting(trx, id);
  if (!routing) return undefined;
  return { ...routing, ...(await advanceSequence(trx, id, count)) };
}
