import type { Kysely, Selectable } from 'kysely';
import type { Instance } from '../domain/instance.ts';
import { compiledStatement } from './compiled.ts';
import { toInstance } from './instances.ts';
import type { Database, InstancesTable, WebhookEndpointsTable } from './schema.ts';
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
type RoutingRow = InstancesTable & {
  [K in keyof WebhookEndpointsTable as `endpoint_${K}`]: WebhookEndpointsTable[K] | null;
};

const GET_ROUTING = compiledStatement<{ id: string }, RoutingRow>((db, arg) =>
  db
    .selectFrom('instances as i')
    .leftJoin('webhook_endpoints as e', 'e.instance_id', 'i.id')
    .selectAll('i')
    .select([
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
    ])
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
  const [first] = rows;
  if (!first) return undefined;
  const endpoints: EndpointRecord[] = [];
  for (const row of rows) {
    const endpoint = endpointOf(row);
    if (endpoint) endpoints.push(toEndpointRecord(endpoint));
  }
  return { instance: toInstance(first), endpoints };
}
