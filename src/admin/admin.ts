import type { Kysely } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import type { Instance } from '../domain/instance.ts';
import { SCOPES, type Scope } from '../domain/scope.ts';
import { generateApiKey } from '../security/api-keys.ts';
import { type ApiKeyRecord, insertApiKey, listApiKeys, revokeApiKey } from '../store/api-keys.ts';
import { createInstance, getInstance, listInstances } from '../store/instances.ts';
import {
  countOrganizations,
  createOrganization,
  findOrganization,
  listOrganizations,
  type Organization,
  PLANS,
  type Plan,
  updateOrganizationPlan,
} from '../store/organizations.ts';
import type { Database } from '../store/schema.ts';
import { AdminError } from './errors.ts';
import { adminCreateUser, type CreatedUser } from './users.ts';

export { AdminError } from './errors.ts';

const DURATION = /^(\d+)(s|m|h|d)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Parses a duration such as `90s`, `10m`, `12h`, `30d` (docs/cli.md) into milliseconds.
 * @throws AdminError when the text is not a positive whole number followed by s, m, h or d.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const amount = Number(match?.[1]);
  const unit = match?.[2] as keyof typeof UNIT_MS | undefined;
  if (!match || unit === undefined || !Number.isSafeInteger(amount) || amount <= 0) {
    throw new AdminError(`--expires-in must be a duration such as 90s, 10m, 12h or 30d (got "${text}")`);
  }
  return amount * UNIT_MS[unit];
}

function parsePlan(plan: string): Plan {
  if (!PLANS.includes(plan as Plan)) throw new AdminError(`--plan must be one of ${PLANS.join(', ')}`);
  return plan as Plan;
}

function parseEnv(env: string): Environment {
  if (env !== 'test' && env !== 'live') throw new AdminError('--env must be test or live');
  return env;
}

/** An organization's plan with the limits stored for it: requests per minute and per day, null unless enterprise. */
export interface PlanChoice {
  plan: Plan;
  perMinute: number | null;
  perDay: number | null;
}

/**
 * Checks a plan and its limits (docs/decisions/0019-rate-limits-and-plans.md): `enterprise` carries its own
 * per-minute and per-day limits, both required, positive whole numbers; `free` and `pro` have fixed limits, so limits
 * given with them are refused.
 * @throws AdminError naming the option and the rule.
 */
export function parsePlanChoice(input: { plan: string; perMinute?: number; perDay?: number }): PlanChoice {
  const plan = parsePlan(input.plan);
  const limits = [
    ['--per-minute', input.perMinute],
    ['--per-day', input.perDay],
  ] as const;
  for (const [option, value] of limits) {
    if (value === undefined) continue;
    if (plan !== 'enterprise')
      throw new AdminError(`${option} applies to the enterprise plan only (${plan} has fixed limits)`);
    if (!Number.isSafeInteger(value) || value <= 0)
      throw new AdminError(`${option} must be a positive integer`);
  }
  if (plan === 'enterprise' && (input.perMinute === undefined || input.perDay === undefined)) {
    const missing = limits.filter(([, value]) => value === undefined).map(([option]) => option);
    throw new AdminError(
      `--plan enterprise needs its own limits: add ${missing.join(' and ')} (requests per minute and per day)`,
    );
  }
  return { plan, perMinute: input.perMinute ?? null, perDay: input.perDay ?? null };
}

/**
 * Creates an organization (`parley org create`). Enterprise plans take their own limits, both required
 * (docs/decisions/0019-rate-limits-and-plans.md). @throws AdminError on a bad plan or limits, or when the name is
 * taken.
 */
export async function adminCreateOrg(
  db: Kysely<Database>,
  input: { name: string; plan?: string; perMinute?: number; perDay?: number },
): Promise<Organization> {
  const name = input.name.trim();
  if (name === '') throw new AdminError('--name is required');
  const choice = parsePlanChoice({ ...input, plan: input.plan ?? 'free' });
  if (await findOrganization(db, name)) throw new AdminError(`organization "${name}" already exists`);
  return createOrganization(db, { name, ...choice });
}

/** Every organization, oldest first (`parley org list`). */
export async function adminListOrgs(db: Kysely<Database>): Promise<Organization[]> {
  return listOrganizations(db);
}

/**
 * Changes an organization's plan or limits (`parley org update`). Without `plan` the current plan is kept, so an
 * enterprise organization's limits can be changed alone; a limit not given keeps its current enterprise value.
 * Moving to free or pro clears the stored limits. Takes effect for API requests once cached keys expire
 * (`AUTH_CACHE_TTL_SECONDS`).
 * @throws AdminError when the organization does not exist, nothing is to change, or the plan rules of
 *   {@link parsePlanChoice} are broken.
 */
export async function adminUpdateOrg(
  db: Kysely<Database>,
  input: { org: string; plan?: string; perMinute?: number; perDay?: number },
): Promise<Organization> {
  if (input.plan === undefined && input.perMinute === undefined && input.perDay === undefined)
    throw new AdminError('nothing to change: give --plan, --per-minute or --per-day');
  const org = await requireOrg(db, input.org);
  const plan = input.plan ?? org.plan;
  const keep = plan === 'enterprise' && org.plan === 'enterprise';
  const perMinute = input.perMinute ?? (keep ? (org.perMinute ?? undefined) : undefined);
  const perDay = input.perDay ?? (keep ? (org.perDay ?? undefined) : undefined);
  const choice = parsePlanChoice({
    plan,
    ...(perMinute === undefined ? {} : { perMinute }),
    ...(perDay === undefined ? {} : { perDay }),
  });
  const updated = await updateOrganizationPlan(db, org.id, choice);
  if (!updated) throw new AdminError(`organization "${input.org}" not found`);
  return updated;
}

async function requireOrg(db: Kysely<Database>, idOrName: string): Promise<Organization> {
  const org = await findOrganization(db, idOrName);
  if (org) return org;
  if ((await countOrganizations(db)) === 0) {
    throw new AdminError(
      `organization "${idOrName}" not found: this store has no organizations yet (the server creates "default" ` +
        "on its first boot; point DATA_DIR or DATABASE_URL at the server's store)",
    );
  }
  throw new AdminError(`organization "${idOrName}" not found`);
}

/** Creates an instance (`parley instance create`). */
export async function adminCreateInstance(
  db: Kysely<Database>,
  input: { org: string; env: string; name?: string },
): Promise<Instance> {
  const org = await requireOrg(db, input.org);
  const env = parseEnv(input.env);
  const count = (await listInstances(db, org.id, env)).length;
  return createInstance(db, { orgId: org.id, env, name: input.name?.trim() || `${env}-${count + 1}` });
}

/**
 * A created key: the record plus the full key, which is shown once and never stored
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export interface CreatedKey {
  record: ApiKeyRecord;
  key: string;
}

/**
 * Creates an API key (`parley key create`): scopes default to `chat:*`; `instances` must be instances of the
 * same organization and environment; `expiresIn` is a duration such as `30d`.
 * @throws AdminError naming the option that is wrong.
 */
export async function adminCreateKey(
  db: Kysely<Database>,
  input: {
    org: string;
    env: string;
    name?: string;
    scopes?: string[];
    instances?: string[];
    expiresIn?: string;
  },
  now: number = Date.now(),
): Promise<CreatedKey> {
  const org = await requireOrg(db, input.org);
  const env = parseEnv(input.env);
  const scopes = input.scopes && input.scopes.length > 0 ? input.scopes : ['chat:*'];
  for (const scope of scopes) {
    if (!SCOPES.includes(scope as Scope))
      throw new AdminError(`--scopes: unknown scope ${scope} (allowed: ${SCOPES.join(', ')})`);
  }
  const instanceIds = input.instances ?? [];
  for (const id of instanceIds) {
    const instance = await getInstance(db, id);
    if (!instance || instance.orgId !== org.id || instance.env !== env) {
      throw new AdminError(`--instances: ${id} is not a ${env} instance of organization ${org.name}`);
    }
  }
  const expiresAt =
    input.expiresIn === undefined ? null : new Date(now + parseDuration(input.expiresIn)).toISOString();
  const generated = generateApiKey(env);
  const record = await insertApiKey(db, {
    orgId: org.id,
    env,
    name: input.name?.trim() || `${env} key`,
    prefix: generated.prefix,
    keyHash: generated.hash,
    scopes: [...new Set(scopes)] as Scope[],
    instanceIds,
    expiresAt,
  });
  return { record, key: generated.key };
}

/** Revokes a key (`parley key revoke`). @throws AdminError when no key has that id. */
export async function adminRevokeKey(db: Kysely<Database>, id: string): Promise<ApiKeyRecord> {
  const record = await revokeApiKey(db, id);
  if (!record) throw new AdminError(`key ${id} not found`);
  return record;
}

/** Keys of an organization (`parley key list`), without any secret. */
export async function adminListKeys(db: Kysely<Database>, org: string): Promise<ApiKeyRecord[]> {
  return listApiKeys(db, (await requireOrg(db, org)).id);
}

/** Instances of an organization (`parley instance list`). */
export async function adminListInstances(db: Kysely<Database>, org: string): Promise<Instance[]> {
  return listInstances(db, (await requireOrg(db, org)).id);
}

/** The e-mail of the dashboard owner the first boot creates (docs/decisions/0022-dashboard.md). */
export const BOOTSTRAP_OWNER_EMAIL = 'owner@parley.local';

/**
 * What the first boot created (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0022-dashboard.md), or null
 * when the store already had organizations.
 */
export interface Bootstrap {
  org: Organization;
  instance: Instance;
  key: CreatedKey;
  /** The dashboard owner of `default` and its generated password (printed once). */
  owner: CreatedUser;
}

/**
 * First boot on an empty store: org `default` (plan free), one test instance, one `svc_test_` key with
 * `chat:*` (docs/decisions/0003-scopes-and-keys.md) and a dashboard owner with a generated password
 * (docs/decisions/0022-dashboard.md). Does nothing when any organization exists.
 */
export async function bootstrapIfEmpty(db: Kysely<Database>): Promise<Bootstrap | null> {
  if ((await countOrganizations(db)) > 0) return null;
  const org = await adminCreateOrg(db, { name: 'default', plan: 'free' });
  const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'sandbox' });
  const key = await adminCreateKey(db, { org: org.id, env: 'test', name: 'bootstrap key' });
  const owner = await adminCreateUser(db, { org: org.id, email: BOOTSTRAP_OWNER_EMAIL, role: 'owner' });
  return { org, instance, key, owner };
}
