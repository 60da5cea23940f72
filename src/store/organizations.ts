import { randomUUID } from 'node:crypto';
import { type Kysely, PostgresAdapter, sql } from 'kysely';
import { signalChannel } from './pg-signals.ts';
import type { Database, OrganizationsTable } from './schema.ts';
import { toIso } from './times.ts';

/** Billing plans (docs/api.md#rate-limits, docs/decisions/0019-rate-limits-and-plans.md). */
export type Plan = 'free' | 'pro' | 'enterprise';
/** Every {@link Plan}, for validation and listings. */
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise'];

/**
 * An organization; `perMinute`/`perDay` are set only for `enterprise` (its own limits,
 * docs/decisions/0019-rate-limits-and-plans.md), and so is `maxInstances` (its own cap on instances per environment,
 * docs/decisions/0029-instances-over-the-api.md). `createdAt` is RFC 3339.
 */
export interface Organization {
  id: string;
  name: string;
  plan: Plan;
  perMinute: number | null;
  perDay: number | null;
  maxInstances: number | null;
  createdAt: string;
}

function toOrganization(row: OrganizationsTable): Organization {
  return {
    id: row.id,
    name: row.name,
    plan: PLANS.includes(row.plan as Plan) ? (row.plan as Plan) : 'free',
    perMinute: row.per_minute,
    perDay: row.per_day,
    maxInstances: row.max_instances,
    createdAt: toIso(row.created_at),
  };
}

/** Input of {@link createOrganization}. */
export interface NewOrganization {
  name: string;
  plan: Plan;
  perMinute?: number | null;
  perDay?: number | null;
  maxInstances?: number | null;
}

/** Inserts an organization. @throws the driver's unique-violation error when the name is taken. */
export async function createOrganization(
  db: Kysely<Database>,
  input: NewOrganization,
): Promise<Organization> {
  const row: OrganizationsTable = {
    id: randomUUID(),
    name: input.name,
    plan: input.plan,
    per_minute: input.perMinute ?? null,
    per_day: input.perDay ?? null,
    created_at: Date.now(),
    max_instances: input.maxInstances ?? null,
  };
  await db.insertInto('organizations').values(row).execute();
  return toOrganization(row);
}

/** Finds an organization by id or by its unique name. */
export async function findOrganization(
  db: Kysely<Database>,
  idOrName: string,
): Promise<Organization | undefined> {
  const row = await db
    .selectFrom('organizations')
    .selectAll()
    .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
    .executeTakeFirst();
  return row ? toOrganization(row) : undefined;
}

/** Loads one organization by id. */
export async function getOrganization(db: Kysely<Database>, id: string): Promise<Organization | undefined> {
  const row = await db.selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? toOrganization(row) : undefined;
}

/** Ids asked per statement by {@link getOrganizations}, well below SQLite's bound on parameters. */
const IDS_PER_READ = 500;

/** The organizations of `ids` that exist, in no particular order (read in statements of {@link IDS_PER_READ} ids). */
export async function getOrganizations(
  db: Kysely<Database>,
  ids: readonly string[],
): Promise<Organization[]> {
  const found: Organization[] = [];
  for (let start = 0; start < ids.length; start += IDS_PER_READ) {
    const rows = await db
      .selectFrom('organizations')
      .selectAll()
      .where('id', 'in', ids.slice(start, start + IDS_PER_READ))
      .execute();
    for (const row of rows) found.push(toOrganization(row));
  }
  return found;
}

/** Number of organizations (0 on a fresh store: the bootstrap runs, docs/decisions/0003-scopes-and-keys.md). */
export async function countOrganizations(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('organizations')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Every organization, oldest first (`parley org list`). */
export async function listOrganizations(db: Kysely<Database>): Promise<Organization[]> {
  const rows = await db
    .selectFrom('organizations')
    .selectAll()
    .orderBy('created_at')
    .orderBy('name')
    .execute();
  return rows.map(toOrganization);
}

/**
 * Sets an organization's plan and limits (`perMinute`/`perDay`: requests; `maxInstances`: instances per environment;
 * each null unless `enterprise`). Every process's cache of verified API keys, which holds the organization with each
 * key, evicts its keys at its next look for revocations (src/auth/authenticator.ts, about once a second); on
 * PostgreSQL the same transaction signals that look to every node listening on the store (`pg_notify` on the `keys`
 * topic with the organization's id, sent at the commit; docs/decisions/0078-store-signals.md), so it is made at once
 * (docs/decisions/0019-rate-limits-and-plans.md).
 * @returns the updated organization, or undefined when no organization has that id.
 */
export async function updateOrganizationPlan(
  db: Kysely<Database>,
  id: string,
  input: { plan: Plan; perMinute: number | null; perDay: number | null; maxInstances: number | null },
): Promise<Organization | undefined> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const updated = await db.transaction().execute(async (trx) => {
    const result = await trx
      .updateTable('organizations')
      .set({
        plan: input.plan,
        per_minute: input.perMinute,
        per_day: input.perDay,
        max_instances: input.maxInstances,
      })
      .where('id', '=', id)
      .executeTakeFirst();
    if (postgres && result.numUpdatedRows > 0n) {
      await sql`select pg_notify(${signalChannel('keys')}, replace(replace(current_schema(), '%', '%25'), ' ', '%20') || ' - ' || ${id})`.execute(
        trx,
      );
    }
    return result.numUpdatedRows > 0n;
  });
  return updated ? getOrganization(db, id) : undefined;
}
