import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.ts';
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
import { type FieldStyle, invalidField } from './admin-input.ts';

export type { Organization, Plan } from '../store/organizations.ts';

/**
 * An organization's plan with the limits stored for it: requests per minute and per day, and instances per
 * environment; each null unless enterprise.
 */
export interface PlanChoice {
  plan: Plan;
  perMinute: number | null;
  perDay: number | null;
  maxInstances: number | null;
}

/**
 * Instances an organization may have per environment, by plan (docs/decisions/0029-instances-over-the-api.md):
 * free 2, pro 20; enterprise carries its own (`--max-instances`), pro's when unset.
 */
export const PLAN_INSTANCE_CAPS = { free: 2, pro: 20 } as const satisfies Record<string, number>;

/**
 * How many instances `org` may have in each environment (docs/decisions/0029-instances-over-the-api.md): its plan's
 * cap, or its own for enterprise (pro's when it has none).
 */
export function instanceCapOf(org: Pick<Organization, 'plan' | 'maxInstances'>): number {
  if (org.plan === 'enterprise') return org.maxInstances ?? PLAN_INSTANCE_CAPS.pro;
  return PLAN_INSTANCE_CAPS[org.plan];
}

function parsePlan(plan: string, style: FieldStyle): Plan {
  if (!PLANS.includes(plan as Plan)) throw invalidField(style, 'plan', ` must be one of ${PLANS.join(', ')}`);
  return plan as Plan;
}

/**
 * The largest per-minute, per-day or instance limit (2^31 - 1): the columns are 32-bit integers on PostgreSQL, and
 * SQLite is held to the same rule (docs/decisions/0019-rate-limits-and-plans.md).
 */
export const MAX_LIMIT = 2_147_483_647;

/** The longest organization name, in characters: the width of its column (docs/cli.md). */
export const MAX_ORG_NAME = 200;

/**
 * Checks a plan and its limits (docs/decisions/0019-rate-limits-and-plans.md): `enterprise` carries its own
 * per-minute and per-day limits, both required, and may carry its own cap on instances per environment
 * (`max-instances`, docs/decisions/0029-instances-over-the-api.md), all positive whole numbers up to
 * {@link MAX_LIMIT}; `free` and `pro` have
 * fixed limits, so limits given with them are refused.
 * @throws DomainError invalid naming the option and the rule.
 */
export function parsePlanChoice(
  input: { plan: string; perMinute?: number; perDay?: number; maxInstances?: number },
  style: FieldStyle = 'cli',
): PlanChoice {
  const plan = parsePlan(input.plan, style);
  const limits = [
    ['per-minute', input.perMinute],
    ['per-day', input.perDay],
  ] as const;
  for (const [option, value] of [...limits, ['max-instances', input.maxInstances] as const]) {
    if (value === undefined) continue;
    if (plan !== 'enterprise')
      throw invalidField(style, option, ` applies to the enterprise plan only (${plan} has fixed limits)`);
    if (!Number.isSafeInteger(value) || value <= 0 || value > MAX_LIMIT)
      throw invalidField(style, option, ` must be a positive integer up to ${MAX_LIMIT}`);
  }
  if (plan === 'enterprise' && (input.perMinute === undefined || input.perDay === undefined)) {
    const missing = limits
      .filter(([, value]) => value === undefined)
      .map(([option]) => invalidField(style, option, '').message);
    throw invalidField(
      style,
      'plan',
      ` enterprise needs its own limits: add ${missing.join(' and ')} (requests per minute and per day)`,
    );
  }
  return {
    plan,
    perMinute: input.perMinute ?? null,
    perDay: input.perDay ?? null,
    maxInstances: input.maxInstances ?? null,
  };
}

/**
 * Creates an organization (`parley org create`). Enterprise plans take their own limits, both required
 * (docs/decisions/0019-rate-limits-and-plans.md), and optionally their own instance cap
 * (docs/decisions/0029-instances-over-the-api.md).
 * @throws DomainError invalid on a missing name or one longer than {@link MAX_ORG_NAME}, a bad plan or limits;
 *   conflict when the name is taken.
 */
export async function adminCreateOrg(
  db: Kysely<Database>,
  input: { name: string; plan?: string; perMinute?: number; perDay?: number; maxInstances?: number },
): Promise<Organization> {
  const name = input.name.trim();
  if (name === '') throw invalidField('cli', 'name', ' is required');
  if (name.length > MAX_ORG_NAME)
    throw invalidField('cli', 'name', ` must be at most ${MAX_ORG_NAME} characters (got ${name.length})`);
  const choice = parsePlanChoice({ ...input, plan: input.plan ?? 'free' });
  if (await findOrganization(db, name)) throw errors.conflict(`organization "${name}" already exists`);
  return createOrganization(db, { name, ...choice });
}

/** Every organization, oldest first (`parley org list`). */
export async function adminListOrgs(db: Kysely<Database>): Promise<Organization[]> {
  return listOrganizations(db);
}

/**
 * Changes an organization's plan or limits (`parley org update`). Without `plan` the current plan is kept, so an
 * enterprise organization's limits can be changed alone; a limit not given keeps its current enterprise value.
 * Moving to free or pro clears the stored limits. Takes effect for API requests within about a second: every server
 * process's key cache drops the organization's keys at its next look (at once on PostgreSQL, where the change is
 * signalled; {@link updateOrganizationPlan}, docs/decisions/0019-rate-limits-and-plans.md); a lower instance cap
 * removes no instance, it refuses new ones until the organization is under it
 * (docs/decisions/0029-instances-over-the-api.md).
 * @throws DomainError invalid when nothing is to change or the plan rules of {@link parsePlanChoice} are broken;
 *   not_found when the organization does not exist.
 */
export async function adminUpdateOrg(
  db: Kysely<Database>,
  input: { org: string; plan?: string; perMinute?: number; perDay?: number; maxInstances?: number },
): Promise<Organization> {
  if (
    input.plan === undefined &&
    input.perMinute === undefined &&
    input.perDay === undefined &&
    input.maxInstances === undefined
  )
    throw errors.badRequest('nothing to change: give --plan, --per-minute, --per-day or --max-instances');
  const org = await requireOrg(db, input.org);
  const plan = input.plan ?? org.plan;
  const keep = plan === 'enterprise' && org.plan === 'enterprise';
  const perMinute = input.perMinute ?? (keep ? (org.perMinute ?? undefined) : undefined);
  const perDay = input.perDay ?? (keep ? (org.perDay ?? undefined) : undefined);
  const maxInstances = input.maxInstances ?? (keep ? (org.maxInstances ?? undefined) : undefined);
  const choice = parsePlanChoice({
    plan,
    ...(perMinute === undefined ? {} : { perMinute }),
    ...(perDay === undefined ? {} : { perDay }),
    ...(maxInstances === undefined ? {} : { maxInstances }),
  });
  const updated = await updateOrganizationPlan(db, org.id, choice);
  if (!updated) throw errors.notFound(`organization "${input.org}" not found`);
  return updated;
}

/**
 * The organization with id or name `idOrName`.
 * @throws DomainError not_found `organization "X" not found`, explaining where the CLI looked when the store has no
 *   organization at all (the server creates `default` on its first boot, docs/cli.md).
 */
export async function requireOrg(db: Kysely<Database>, idOrName: string): Promise<Organization> {
  const org = await findOrganization(db, idOrName);
  if (org) return org;
  if ((await countOrganizations(db)) === 0) {
    throw errors.notFound(
      `organization "${idOrName}" not found: this store has no organizations yet (the server creates "default" ` +
        "on its first boot; point DATA_DIR or DATABASE_URL at the server's store)",
    );
  }
  throw errors.notFound(`organization "${idOrName}" not found`);
}
