import type { Kysely, Selectable, Transaction } from 'kysely';
import { failGoneLeftovers } from './delivery-finish.ts';
import type { Database } from './schema.ts';
import type { WebhookEndpointsTable } from './schema-webhooks.ts';

/**
 * An instance's extra webhook endpoints (migration 0017, docs/decisions/0035-webhook-endpoints.md). The secret
 * stays sealed here; the app layer seals and opens it with the SecretBox. Times are epoch ms.
 */

/** Most endpoints an instance may have (docs/decisions/0035-webhook-endpoints.md). */
export const MAX_ENDPOINTS = 10;

/** An endpoint row as the app reads it (`events` parsed, `enabled` a boolean). */
export interface EndpointRecord {
  id: string;
  instanceId: string;
  url: string;
  events: string[];
  description: string | null;
  secretSealed: string;
  /**
   * The secret the last rotation replaced, sealed, and when it stops signing (epoch ms); both null when there is
   * none (migration 0031, docs/decisions/0094-secret-rotation-grace.md). A time in the past means it signs no more.
   */
  previousSecretSealed: string | null;
  previousSecretExpiresAt: number | null;
  /** The whole broker URL sealed when it carries a password or token (migration 0018); null otherwise. */
  urlSealed: string | null;
  enabled: boolean;
  disabledAt: number | null;
  disabledReason: string | null;
  createdAt: number;
  updatedAt: number;
}

/** The row's fields as {@link EndpointRecord}. */
export function toEndpointRecord(row: Selectable<WebhookEndpointsTable>): EndpointRecord {
  const events: unknown = JSON.parse(row.events);
  return {
    id: row.id,
    instanceId: row.instance_id,
    url: row.url,
    events: Array.isArray(events) ? events.filter((e): e is string => typeof e === 'string') : [],
    description: row.description,
    secretSealed: row.secret,
    previousSecretSealed: row.previous_secret ?? null,
    previousSecretExpiresAt:
      row.previous_secret_expires_at === null ? null : Number(row.previous_secret_expires_at),
    urlSealed: row.url_sealed ?? null,
    enabled: row.enabled === 1,
    disabledAt: row.disabled_at === null ? null : Number(row.disabled_at),
    disabledReason: row.disabled_reason,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** The endpoints of `instanceId`, oldest first. */
export async function listEndpoints(
  db: Kysely<Database> | Transaction<Database>,
  instanceId: string,
): Promise<EndpointRecord[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(toEndpointRecord);
}

/** Endpoint `id` of `instanceId`, or undefined (another instance's endpoint reads as absent). */
export async function getEndpoint(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
): Promise<EndpointRecord | undefined> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row === undefined ? undefined : toEndpointRecord(row);
}

/** A new endpoint; `now` epoch ms. */
export interface NewEndpoint {
  id: string;
  instanceId: string;
  url: string;
  events: readonly string[];
  description: string | null;
  secretSealed: string;
  /** The whole broker URL sealed when it carries a password or token (migration 0018); null otherwise. */
  urlSealed: string | null;
  now: number;
}

/**
 * Inserts an endpoint unless the instance already has `max` (counted in the same transaction).
 * @returns false when the cap was reached (nothing inserted).
 */
export async function insertEndpoint(
  db: Kysely<Database>,
  endpoint: NewEndpoint,
  max: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    // Serialises concurrent creations for one instance on PostgreSQL (the instance row's lock).
    await trx
      .updateTable('instances')
      .set((eb) => ({ id: eb.ref('id') }))
      .where('id', '=', endpoint.instanceId)
      .execute();
    const count = await trx
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('instance_id', '=', endpoint.instanceId)
      .executeTakeFirstOrThrow();
    if (Number(count.count) >= max) return false;
    await trx
      .insertInto('webhook_endpoints')
      .values({
        id: endpoint.id,
        instance_id: endpoint.instanceId,
        url: endpoint.url,
        events: JSON.stringify(endpoint.events),
        description: endpoint.description,
        secret: endpoint.secretSealed,
        previous_secret: null,
        previous_secret_expires_at: null,
        url_sealed: endpoint.urlSealed,
        enabled: 1,
        disabled_at: null,
        disabled_reason: null,
        created_at: endpoint.now,
        updated_at: endpoint.now,
      })
      .execute();
    return true;
  });
}

/** The reason a 410's lane failure records when the disabled row kept none. */
const GONE = 'receiver answered 410 Gone';

/** Fields {@link updateEndpoint} may change; `enabled: true` also clears a 410's `disabled_at`/`disabled_reason`. */
export interface EndpointPatch {
  /** The URL as shown and, for a broker URL with a password or token, the whole URL sealed (else null). */
  url?: { shown: string; sealed: string | null };
  events?: readonly string[];
  description?: string | null;
  enabled?: boolean;
}

/**
 * Applies `patch` to endpoint `id` of `instanceId` at `now` (epoch ms), in one transaction. Enabling an endpoint a
 * 410 disabled first fails the deliveries that 410 left pending (delivery-finish.ts `failGoneLeftovers`).
 * @returns false when there is no such endpoint.
 */
export async function updateEndpoint(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  patch: EndpointPatch,
  now: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (patch.enabled === true) {
      const gone = await trx
        .selectFrom('webhook_endpoints')
        .select('disabled_reason')
        .where('instance_id', '=', instanceId)
        .where('id', '=', id)
        .where('disabled_at', 'is not', null)
        .executeTakeFirst();
      if (gone) await failGoneLeftovers(trx, instanceId, id, gone.disabled_reason ?? GONE, now);
    }
    const result = await trx
      .updateTable('webhook_endpoints')
      .set({
        updated_at: now,
        ...(patch.url === undefined ? {} : { url: patch.url.shown, url_sealed: patch.url.sealed }),
        ...(patch.events === undefined ? {} : { events: JSON.stringify(patch.events) }),
        ...(patch.description === undefined ? {} : { description: patch.description }),
        ...(patch.enabled === undefined
          ? {}
          : patch.enabled
            ? { enabled: 1, disabled_at: null, disabled_reason: null }
            : { enabled: 0 }),
      })
      .where('instance_id', '=', instanceId)
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  });
}

/**
 * Gives endpoint `id` of `instanceId` the new secret `secretSealed` at `now` (epoch ms), in one statement
 * (docs/decisions/0094-secret-rotation-grace.md): the secret it replaces becomes the previous secret, signing until
 * `previousExpiresAt` (epoch ms), in place of any earlier previous secret; with `previousExpiresAt` null (no grace)
 * no previous secret is kept. The statement reads the replaced secret itself, so two rotations at once each keep
 * the secret the other replaced or its own, never a secret that was not the endpoint's.
 * @returns false when there is no such endpoint.
 */
export async function rotateEndpointSecret(
  db: Kysely<Database>,
  instanceId: string,
  id: string,
  secretSealed: string,
  previousExpiresAt: number | null,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({
      secret: secretSealed,
      previous_secret: previousExpiresAt === null ? null : eb.ref('secret'),
      previous_secret_expires_at: previousExpiresAt,
      updated_at: now,
    }))
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Deletes endpoint `id` of `instanceId` with its deliveries (nothing more is sent to it); the attempt rows stay
 * until their events leave the log.
 * @returns false when there is no such endpoint.
 */
export async function deleteEndpoint(db: Kysely<Database>, instanceId: string, id: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    // First the instance's webhook state row, which a recording transaction holds from its routing read to its
    // commit (instance-routing.ts `ADVANCE`): one that read this endpoint in the routing commits its deliveries
    // before the delete below reads them. One whose statement read the routing just before this commit and waits for
    // the row meanwhile can still queue to the endpoint; the retention job deletes such deliveries
    // (`deleteOrphanDeliveries`, docs/decisions/0035-webhook-endpoints.md).
    await trx
      .updateTable('webhook_state')
      .set((eb) => ({ last_sequence: eb.ref('last_sequence') }))
      .where('instance_id', '=', instanceId)
      .execute();
    // Deliveries before the endpoint row: the order a 410's `finishAttempt` locks them in (no deadlock between
    // the two on PostgreSQL). Their attempt rows stay in the log until their events are pruned.
    await trx
      .deleteFrom('webhook_deliveries')
      .where('instance_id', '=', instanceId)
      .where('endpoint_id', '=', id)
      .execute();
    const result = await trx
      .deleteFrom('webhook_endpoints')
      .where('instance_id', '=', instanceId)
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  });
}
