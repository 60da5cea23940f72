import type { Kysely } from 'kysely';
import type { Instance } from '../domain/instance.ts';
import { countOrganizations, type Organization } from '../store/organizations.ts';
import type { Database } from '../store/schema.ts';
import { adminCreateKey, type CreatedKey } from './api-keys.ts';
import { adminCreateInstance } from './instances.ts';
import { adminCreateOrg } from './organizations.ts';
import { adminCreateUser, type CreatedUser } from './users.ts';

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
 * (docs/decisions/0022-dashboard.md), written in one transaction: a start that dies or fails half-way leaves the store
 * empty, so the next start bootstraps again rather than finding an organization nobody holds a key for. Does nothing
 * when any organization exists, or when another node created the organization first (two nodes starting at once on
 * an empty store: only the one whose transaction committed bootstraps).
 * @throws whatever the store raised when no other node bootstrapped meanwhile (nothing of this boot is kept).
 */
export async function bootstrapIfEmpty(db: Kysely<Database>): Promise<Bootstrap | null> {
  if ((await countOrganizations(db)) > 0) return null;
  try {
    return await db.transaction().execute(async (trx) => {
      const org = await adminCreateOrg(trx, { name: 'default', plan: 'free' });
      const instance = await adminCreateInstance(trx, { org: org.id, env: 'test', name: 'sandbox' });
      const key = await adminCreateKey(trx, { org: org.id, env: 'test', name: 'bootstrap key' });
      const owner = await adminCreateUser(trx, { org: org.id, email: BOOTSTRAP_OWNER_EMAIL, role: 'owner' });
      return { org, instance, key, owner };
    });
  } catch (error) {
    // Another node of a cluster started at the same moment found the store empty too and committed `default` first
    // (the unique name refused this one's insert): it owns the first boot, and this node starts as on a later boot.
    if ((await countOrganizations(db)) > 0) return null;
    throw error;
  }
}
