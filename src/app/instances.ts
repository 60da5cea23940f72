import type { Kysely } from 'kysely';
import type { AuthContext } from '../auth/authenticator.ts';
import { errors } from '../domain/errors.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { Store } from '../store/database.ts';
import { createInstance, getInstance, listInstances } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';
import { type FieldStyle, parseEnv } from './admin-input.ts';
import { requireOrg } from './organizations.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The instance a request addresses (docs/decisions/0002-instance-resolution.md). Candidates are the key's
 * organization's instances in the key's environment, narrowed by the key's allow-list. `selector` is an instance UUID
 * or a linked phone number. Omitted: the candidate that connected most recently; else the only candidate.
 * @throws DomainError not_found `instance not found` for an unknown or not addressable instance (never 403,
 *   docs/decisions/0002-instance-resolution.md); invalid `several instances: name one with from` when the choice is
 *   ambiguous.
 */
export async function resolveInstance(
  db: Kysely<Database>,
  auth: AuthContext,
  selector: string | undefined,
): Promise<Instance> {
  const all = await listInstances(db, auth.org.id, auth.env);
  const candidates = auth.instanceIds.length === 0 ? all : all.filter((i) => auth.instanceIds.includes(i.id));
  if (selector !== undefined && selector !== '') {
    const wanted = selector.trim();
    const match = UUID.test(wanted)
      ? candidates.find((i) => i.id === wanted.toLowerCase())
      : candidates.find((i) => i.phone !== null && i.phone === wanted.replace(/^\+/, ''));
    if (!match) throw errors.instanceNotFound();
    return match;
  }
  const connected = candidates
    .filter((i) => i.lastConnectedAt !== null)
    .sort((a, b) => (b.lastConnectedAt ?? '').localeCompare(a.lastConnectedAt ?? ''));
  const latest = connected[0];
  if (latest) return latest;
  const [only, ...others] = candidates;
  if (!only) throw errors.instanceNotFound();
  if (others.length > 0) throw errors.badRequest('several instances: name one with from');
  return only;
}

/**
 * The instance with id `instanceId`, read from the store: what every instance-scoped service method starts from,
 * so a call carries only the id (and can be run by any node).
 * @throws DomainError not_found `instance not found`.
 */
export async function loadInstance(db: Kysely<Database>, instanceId: InstanceId): Promise<Instance> {
  const instance = await getInstance(db, instanceId);
  if (!instance) throw errors.instanceNotFound();
  return instance;
}

/**
 * Creates an instance of organization `org` (id or name) in `env` (`parley instance create`, the dashboard); the name
 * defaults to `<env>-<n>`. `style` says how errors name the fields (CLI options by default).
 * @throws DomainError not_found for an unknown organization; invalid for an environment other than test or live.
 */
export async function adminCreateInstance(
  db: Kysely<Database>,
  input: { org: string; env: string; name?: string; style?: FieldStyle },
): Promise<Instance> {
  const org = await requireOrg(db, input.org);
  const env = parseEnv(input.env, input.style ?? 'cli');
  const count = (await listInstances(db, org.id, env)).length;
  return createInstance(db, { orgId: org.id, env, name: input.name?.trim() || `${env}-${count + 1}` });
}

/**
 * Instances of an organization (id or name) (`parley instance list`, the dashboard), oldest first.
 * @throws DomainError not_found for an unknown organization.
 */
export async function adminListInstances(db: Kysely<Database>, org: string): Promise<Instance[]> {
  return listInstances(db, (await requireOrg(db, org)).id);
}

/**
 * The instances requests address (docs/decisions/0002-instance-resolution.md): resolved once per request by the HTTP
 * layer, then handed to the instance-scoped services, which take the {@link Instance} itself.
 */
export class InstanceService {
  readonly #store: Store;

  constructor(deps: { store: Store }) {
    this.#store = deps.store;
  }

  /** See {@link resolveInstance}. */
  resolve(auth: AuthContext, selector: string | undefined): Promise<Instance> {
    return resolveInstance(this.#store.db, auth, selector);
  }

  /** See {@link loadInstance}: for a caller that has only the id (the CLI, a test). */
  load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }
}
