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
 * (docs/decisions/0022-dashboard.md). Does nothing when any organization exists, or when another node created the
 * organization first (two nodes starting at once on an empty store: only the one whose insert won bootstraps).
 */
export async function bootstrapIfEmpty(db: Kysely<Database>): Promise<Bootstrap | null> {
  if ((await countOrganizations(db)) > 0) return null;
  let org: Organization;
  try {
    org = await adminCreateOrg(db, { name: 'default', plan: 'free' });
  } catch (error) {
    // Another node of a cluster started at the same moment found the store empty too and created `default` first
    // (the unique name refused this one's insert): it owns the first boot, and this node starts as on a later boot.
    if ((await countOrganizations(db)) > 0) return null;
    throw error;
  }
  const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: 'sandbox' });
  const key = await adminCreateKey(db, { org: org.id, env: 'test', name: 'bootstrap key' });
  const owner = await adminCreateUser(db, { org: org.id, email: BOOTSTRAP_OWNER_EMAIL, role: 'owner' });
  return { org, instance, key, owner };
}
