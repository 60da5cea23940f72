import { randomUUID } from 'node:crypto';
import type { Kysely, Updateable } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import { EVENT_TYPES, type EventType, type Instance } from '../domain/instance.ts';
import { compiledStatement } from './compiled.ts';
import { tellInstancesWritten } from './instance-writes.ts';
import type { Database, InstancesTable } from './schema.ts';
import { toIso, toMs } from './times.ts';

/**
 * An instance row's columns the service writes and reads (the store's triggers keep `routing_version`; the logout's
 * transaction moves `account_generation`, src/sends/logout.ts).
 */
export type InstanceColumns = Omit<InstancesTable, 'routing_version' | 'account_generation'>;

/** Converts a stored row (times to RFC 3339); unknown event names in a stored subscription are dropped. */
export function toInstance(row: InstanceColumns): Instance {
  let subscribe: EventType[] | null = null;
  if (row.subscribe !== null) {
    const parsed: unknown = JSON.parse(row.subscribe);
    subscribe = Array.isArray(parsed) ? EVENT_TYPES.filter((t) => parsed.includes(t)) : [];
  }
  return {
    id: row.id,
    orgId: row.org_id,
    env: row.env === 'live' ? 'live' : 'test',
    name: row.name,
    phone: row.phone,
    jid: row.jid,
    pushName: row.push_name,
    webhookUrl: row.webhook_url,
    subscribe,
    hmacKeySealed: row.hmac_key,
    desiredState: row.desired_state === 'connected' ? 'connected' : 'disconnected',
    lastConnectedAt: toIso(row.last_connected_at),
    createdAt: toIso(row.created_at),
  };
}

/** Inserts an instance of `env` for organization `orgId`. */
export async function createInstance(
  db: Kysely<Database>,
  input: { orgId: string; env: Environment; name: string },
): Promise<Instance> {
  const row: InstanceColumns = {
    id: randomUUID(),
    org_id: input.orgId,
    env: input.env,
    name: input.name,
    phone: null,
    jid: null,
    push_name: null,
    webhook_url: null,
    subscribe: null,
    hmac_key: null,
    desired_state: 'disconnected',
    last_connected_at: null,
    created_at: Date.now(),
  };
  await db.insertInto('instances').values(row).execute();
  tellInstancesWritten(db);
  return toInstance(row);
}

/** How many instances organization `orgId` has in `env`. */
export async function countInstances(db: Kysely<Database>, orgId: string, env: Environment): Promise<number> {
  const row = await db
    .selectFrom('instances')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('org_id', '=', orgId)
    .where('env', '=', env)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * What {@link createInstanceWithinCap} did: created the instance, or refused because organization already had `count`
 * instances of the environment (at or above the cap).
 */
export type CappedCreation = { created: Instance } | { refused: true; count: number };

/**
 * Inserts an instance of `env` for organization `orgId` unless the organization already has `cap` instances of
 * `env` (docs/decisions/0029-instances-over-the-api.md). `name` gets the count before the insert (for a default
 * name). One transaction that first writes the organization's row (a no-op update): PostgreSQL locks that row and
 * SQLite takes its write lock, so concurrent creations for one organization are counted one after the other and
 * never pass the cap together. Given a transaction, runs in it (the first boot writes its instance with the rest of
 * its setup, src/app/bootstrap.ts).
 */
export async function createInstanceWithinCap(
  db: Kysely<Database>,
  input: { orgId: string; env: Environment; cap: number; name: (count: number) => string },
): Promise<CappedCreation> {
  const create = async (trx: Kysely<Database>): Promise<CappedCreation> => {
    await trx
      .updateTable('organizations')
      .set((eb) => ({ name: eb.ref('name') }))
      .where('id', '=', input.orgId)
      .execute();
    const count = await countInstances(trx, input.orgId, input.env);
    if (count >= input.cap) return { refused: true, count };
    return {
      created: await createInstance(trx, { orgId: input.orgId, env: input.env, name: input.name(count) }),
    };
  };
  if (db.isTransaction) return create(db);
  try {
    return await db.transaction().execute(create);
  } finally {
    tellInstancesWritten(db);
  }
}

/**
 * Deletes instance `id` and, by the store's `on delete cascade` foreign keys (migrations 0001–0020 and 0037, on
 * SQLite and PostgreSQL alike), every row of it: engine credentials, messages, chat peers, webhook state, webhook
 * endpoints, events (with their deliveries and attempts), socket lock, lease, gateway replay memory, call settings,
 * send jobs, send pace, LID mappings, labels, chat labels and recorded update ids. Repeated when PostgreSQL fails it
 * to break a deadlock.
 * @returns whether an instance was deleted.
 */
export async function deleteInstance(db: Kysely<Database>, id: string): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await db.deleteFrom('instances').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    } catch (error) {
      // PostgreSQL breaks a deadlock with a transaction recording the instance's events (it locks the instance row
      // after writing a row that references it, the cascade the other way round) by failing one of them: the delete
      // is the one to repeat, as nothing of it was kept.
      if (attempt >= DELETE_ATTEMPTS || !isDeadlock(error)) throw error;
    } finally {
      // Told after each try, failed ones too: whether a failed statement's commit happened may be unknown.
      tellInstancesWritten(db);
    }
  }
}

/** Tries of {@link deleteInstance} when PostgreSQL picks it to break a deadlock. */
const DELETE_ATTEMPTS = 5;

/** Whether `error` is PostgreSQL's deadlock (SQLSTATE 40P01). */
function isDeadlock(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'code' in error && error.code === '40P01';
}

/** Loads one instance by id. */
export async function getInstance(db: Kysely<Database>, id: string): Promise<Instance | undefined> {
  const row = (await GET_INSTANCE.run(db, { id })).rows[0];
  return row ? toInstance(row) : undefined;
}

const GET_INSTANCE = compiledStatement<{ id: string }, InstanceColumns>((db, arg) =>
  db.selectFrom('instances').selectAll().where('id', '=', arg('id')),
);

/** The instances of an organization, optionally of one environment, oldest first. */
export async function listInstances(
  db: Kysely<Database>,
  orgId: string,
  env?: Environment,
): Promise<Instance[]> {
  const { rows } = env
    ? await LIST_INSTANCES_OF_ENV.run(db, { orgId, env })
    : await LIST_INSTANCES.run(db, { orgId });
  return rows.map(toInstance);
}

function listStatement(ofEnv: boolean) {
  return compiledStatement<{ orgId: string; env?: Environment }, InstanceColumns>((db, arg) => {
    let query = db.selectFrom('instances').selectAll().where('org_id', '=', arg('orgId'));
    if (ofEnv) query = query.where('env', '=', arg('env') ?? 'test');
    return query.orderBy('created_at').orderBy('id');
  });
}

const LIST_INSTANCES = listStatement(false);
const LIST_INSTANCES_OF_ENV = listStatement(true);

/**
 * Instances the user left connected and that hold a login: reconnected at boot
 * (docs/decisions/0016-session-lifecycle.md).
 */
export async function listInstancesToRestore(db: Kysely<Database>): Promise<Instance[]> {
  const rows = await db
    .selectFrom('instances')
    .selectAll()
    .where('desired_state', '=', 'connected')
    .where('jid', 'is not', null)
    .execute();
  return rows.map(toInstance);
}

/**
 * An instance of organization `orgId` in `env` already linked to `phone`, if any (a phone selects one instance
 * per organization, docs/decisions/0002-instance-resolution.md; other organizations are never consulted,
 * docs/decisions/0020-security-promises.md).
 */
export async function findInstanceByPhone(
  db: Kysely<Database>,
  orgId: string,
  env: Environment,
  phone: string,
): Promise<Instance | undefined> {
  const row = await db
    .selectFrom('instances')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('env', '=', env)
    .where('phone', '=', phone)
    .executeTakeFirst();
  return row ? toInstance(row) : undefined;
}

/** Fields of an instance that change after creation. */
export interface InstancePatch {
  name?: string;
  phone?: string | null;
  jid?: string | null;
  pushName?: string | null;
  webhookUrl?: string | null;
  subscribe?: EventType[];
  hmacKeySealed?: string | null;
  desiredState?: 'connected' | 'disconnected';
  /** RFC 3339. */
  lastConnectedAt?: string | null;
}

/**
 * Applies `patch` to instance `id`; fields left undefined are untouched.
 * @returns false when no instance has that id (deleted meanwhile); true otherwise, and for an empty patch.
 * @throws RangeError on a bad time.
 */
export async function updateInstance(
  db: Kysely<Database>,
  id: string,
  patch: InstancePatch,
): Promise<boolean> {
  const values: Updateable<InstancesTable> = {};
  if (patch.name !== undefined) values.name = patch.name;
  if (patch.phone !== undefined) values.phone = patch.phone;
  if (patch.jid !== undefined) values.jid = patch.jid;
  if (patch.pushName !== undefined) values.push_name = patch.pushName;
  if (patch.webhookUrl !== undefined) values.webhook_url = patch.webhookUrl;
  if (patch.subscribe !== undefined) values.subscribe = JSON.stringify(patch.subscribe);
  if (patch.hmacKeySealed !== undefined) values.hmac_key = patch.hmacKeySealed;
  if (patch.desiredState !== undefined) values.desired_state = patch.desiredState;
  if (patch.lastConnectedAt !== undefined) values.last_connected_at = toMs(patch.lastConnectedAt);
  if (Object.keys(values).length === 0) return true;
  try {
    const result = await db.updateTable('instances').set(values).where('id', '=', id).executeTakeFirst();
    return result.numUpdatedRows > 0n;
  } finally {
    tellInstancesWritten(db);
  }
}
