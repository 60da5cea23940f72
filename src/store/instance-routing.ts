import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import { BoundedMap } from '../domain/bounded-map.ts';
import type { Instance } from '../domain/instance.ts';
import { extended } from '../domain/objects.ts';
import { advanceMarking, takeRidingMarks } from './advance-marks.ts';
import { compiledStatement } from './compiled.ts';
import { type InstanceColumns, toInstance } from './instances.ts';
import type { Database } from './schema.ts';
import type { WebhookEndpointsTable } from './schema-webhooks.ts';
import { barrierOf } from './shared-advances.ts';
import { toIso } from './times.ts';
import { type EndpointRecord, toEndpointRecord } from './webhook-endpoints.ts';

/**
 * What routes an instance's events to their receivers (docs/decisions/0035-webhook-endpoints.md): the instance's
 * row (default webhook URL, subscription) and every one of its extra endpoints, enabled or not, oldest first.
 */
export interface InstanceRouting {
  readonly instance: Readonly<Instance>;
  readonly endpoints: readonly Readonly<EndpointRecord>[];
}

/** One row of the join: the instance's columns, then one endpoint's (all null when it has none). */
type RoutingRow = InstanceColumns & { routing_version: number | string } & {
  [K in keyof WebhookEndpointsTable as `endpoint_${K}`]: Selectable<WebhookEndpointsTable>[K] | null;
};

/** The endpoint columns of the join, each under its `endpoint_` name. */
const ENDPOINT_COLUMNS = [
  'e.id as endpoint_id',
  'e.instance_id as endpoint_instance_id',
  'e.url as endpoint_url',
  'e.events as endpoint_events',
  'e.description as endpoint_description',
  'e.secret as endpoint_secret',
  'e.previous_secret as endpoint_previous_secret',
  'e.previous_secret_expires_at as endpoint_previous_secret_expires_at',
  'e.url_sealed as endpoint_url_sealed',
  'e.enabled as endpoint_enabled',
  'e.disabled_at as endpoint_disabled_at',
  'e.disabled_reason as endpoint_disabled_reason',
  'e.created_at as endpoint_created_at',
  'e.updated_at as endpoint_updated_at',
  'e.routing_stamp as endpoint_routing_stamp',
] as const;

/**
 * The instance and its endpoints in one statement (a left join, compiled once per store), read by
 * {@link routeAndAdvance} when the instance's routing moved; on PostgreSQL each statement is a round trip.
 */
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

/** What {@link ADVANCE} answers: the webhook state after the advance and what tells the instance's routing. */
export interface AdvanceRow {
  last_sequence: number | string;
  disabled_at: number | null;
  disabled_reason: string | null;
  routing_version: number | string;
  /** `count:sum` of the instance's endpoints and their routing stamps (see {@link endpointsDigest}). */
  endpoints_digest: string;
}

/**
 * Advances the instance's sequence by `count` when the instance exists (an insert from its row, so nothing is
 * written for an unknown one), and answers the state's new values with the instance's routing version and its
 * endpoints' digest, in one statement on both dialects (docs/decisions/0065-routing-version.md). The upsert locks
 * the state row to the transaction's end.
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
      // Text on both dialects: SQLite's `||` and PostgreSQL's `anynonarray || text` write integers in full.
      eb
        .selectFrom('webhook_endpoints')
        .select(sql<string>`count(*) || ':' || coalesce(sum(routing_stamp), 0)`.as('digest'))
        .whereRef('webhook_endpoints.instance_id', '=', 'webhook_state.instance_id')
        .as('endpoints_digest'),
    ]),
);

/**
 * `count:sum` of an instance's endpoints and their routing stamps, as {@link ADVANCE} writes it: an endpoint added
 * or removed changes the count, one changed draws a new stamp and so changes the sum (a random 52-bit number each,
 * so a change leaves the sum as it was with a chance of 2^-52).
 */
function endpointsDigest(rows: readonly RoutingRow[]): string {
  let count = 0;
  let sum = 0n;
  for (const row of rows) {
    if (row.endpoint_id === null) continue;
    count += 1;
    sum += BigInt(row.endpoint_routing_stamp ?? 0);
  }
  return `${count}:${sum}`;
}

/** The key a kept routing is checked by: the instance's routing version and its endpoints' digest. */
function routingKey(version: number | string, digest: string): string {
  return `${version}|${digest}`;
}

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
    previous_secret: row.endpoint_previous_secret,
    previous_secret_expires_at: row.endpoint_previous_secret_expires_at,
    url_sealed: row.endpoint_url_sealed,
    enabled: row.endpoint_enabled,
    disabled_at: row.endpoint_disabled_at,
    disabled_reason: row.endpoint_disabled_reason,
    created_at: row.endpoint_created_at,
    updated_at: row.endpoint_updated_at,
    routing_stamp: row.endpoint_routing_stamp ?? 0,
  };
}

/** The routing of the join's `rows` (at least one: the instance's columns repeat on each). */
function routingOf(rows: readonly RoutingRow[]): { instance: Instance; endpoints: EndpointRecord[] } {
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

/** The routing a process last read for an instance, and the key ({@link routingKey}) it was read at. */
interface KnownRouting {
  key: string;
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

/** `routing` frozen, arrays and objects within it too: a kept routing is handed to every later batch. */
function frozen(routing: InstanceRouting): InstanceRouting {
  if (routing.instance.subscribe) Object.freeze(routing.instance.subscribe);
  Object.freeze(routing.instance);
  for (const endpoint of routing.endpoints) {
    Object.freeze(endpoint.events);
    Object.freeze(endpoint);
  }
  Object.freeze(routing.endpoints);
  return Object.freeze(routing);
}

/**
 * Takes `count` sequence numbers for the webhook events of instance `id` and answers what routes them
 * (docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0035-webhook-endpoints.md), inside the recorder's
 * transaction: the state row stays locked until its commit, so the instance's events are numbered in commit order.
 * One statement takes the numbers and answers the instance's routing version and its endpoints' digest; the routing
 * itself is read again, in the same transaction, only when those differ from the ones this process last read it at
 * (docs/decisions/0065-routing-version.md: the store draws a new random version or stamp at every change to the
 * instance or its endpoints, so equal ones mean the routing the statement would have read is the one kept). The
 * routing answered is frozen: later batches share it. In a transaction shared by several instances' recorder
 * batches on PostgreSQL the numbers are taken with the other instances' in one statement (`AdvanceBarrier`,
 * src/store/shared-advances.ts). Sent marks noted on `trx` for the instance (src/store/advance-marks.ts) are made by
 * the same statement and answered before this returns. → undefined, and no number taken, when no such instance exists.
 * @throws what the store throws (`store_unavailable` on a fault, docs/decisions/0011-store-faults.md); an Error when
 * the instance vanished between the advance and the routing's read (its state row's lock rules that out).
 */
export async function routeAndAdvance(
  trx: Transaction<Database>,
  id: string,
  count: number,
): Promise<AdvancedRouting | undefined> {
  // In a transaction shared by several instances' batches, the numbers are taken with theirs in one statement
  // (docs/decisions/0082-recorder-turns-on-postgres.md).
  // Sent marks riding on the advance are made by its statement (docs/decisions/0087-sent-marks-with-the-advance.md).
  const marks = takeRidingMarks(trx, id);
  const barrier = barrierOf(trx);
  const state =
    barrier !== undefined
      ? await barrier.wait(id, count, marks)
      : marks !== undefined
        ? await advanceMarking(trx, id, count, marks)
        : (await ADVANCE.run(trx, { id, count })).rows[0];
  if (!state) return undefined;
  const known = knownOf(trx);
  let kept = known.use(id);
  if (kept?.key !== routingKey(state.routing_version, state.endpoints_digest)) {
    const { rows } = await GET_ROUTING.run(trx, { id });
    const [first] = rows;
    if (!first) throw new Error(`instance ${id} vanished after its sequence was advanced`);
    kept = {
      key: routingKey(first.routing_version, endpointsDigest(rows)),
      routing: frozen(routingOf(rows)),
    };
    known.set(id, kept);
  }
  return extended(kept.routing, {
    last: Number(state.last_sequence),
    disabledAt: toIso(state.disabled_at),
    disabledReason: state.disabled_reason,
  });
}
