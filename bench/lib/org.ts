import type { Kysely } from 'kysely';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Database } from '../../src/store/schema.ts';

/**
 * Creates the organization a benchmark runs as: the `enterprise` plan with limits no run reaches (10⁹ requests per
 * minute, 2·10⁹ per day: below PostgreSQL's integer limit), so the rate limiter is exercised on every request but
 * never refuses, and an instance cap no run reaches (10⁶ per environment, docs/decisions/0029-instances-over-the-api.md);
 * and one key of `env` named `name`. → the org's id and the key's secret.
 */
export async function createBenchOrg(
  db: Kysely<Database>,
  name: string,
  env: 'test' | 'live',
): Promise<{ orgId: string; key: string }> {
  const org = await adminCreateOrg(db, {
    name,
    plan: 'enterprise',
    perMinute: 1_000_000_000,
    perDay: 2_000_000_000,
    maxInstances: 1_000_000,
  });
  const { key } = await adminCreateKey(db, { org: org.id, env, name });
  return { orgId: org.id, key };
}
