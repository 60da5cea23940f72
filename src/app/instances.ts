import type { Kysely } from 'kysely';
import type { AuthContext } from '../auth/authenticator.ts';
import type { Environment } from '../domain/environment.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { MediaStore } from '../media/store.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { onInstancesWritten } from '../store/instance-writes.ts';
import {
  createInstanceWithinCap,
  deleteInstance,
  getInstance,
  listInstances,
  updateInstance,
} from '../store/instances.ts';
import type { StoreSignals } from '../store/pg-signals.ts';
import type { Database } from '../store/schema.ts';
import { type FieldStyle, invalidField, parseEnv } from './admin-input.ts';
import { InstanceLists } from './instance-lists.ts';
import { instanceCapOf, type Organization, requireOrg } from './organizations.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Longest instance name, characters (after trimming), in the API, the dashboard and the CLI alike. */
export const MAX_INSTANCE_NAME = 60;

/**
 * The instances `auth` may address (docs/decisions/0002-instance-resolution.md): its organization's instances in its
 * environment, narrowed by its allow-list; oldest first.
 */
async function addressableInstances(
  db: Kysely<Database>,
  auth: AuthContext,
  lists?: InstanceLists,
  fresh = false,
): Promise<Instance[]> {
  return narrowed(
    auth,
    await (lists ? lists.list(auth.org.id, auth.env, fresh) : listInstances(db, auth.org.id, auth.env)),
  );
}

/** The instances of `all` that `auth` may address: all, or those of its allow-list. */
function narrowed(auth: AuthContext, all: Instance[]): Instance[] {
  return auth.instanceIds.length === 0 ? all : all.filter((i) => auth.instanceIds.includes(i.id));
}

/**
 * `pick` over the instances `auth` may address. When `lists` holds a list kept between turns
 * (docs/decisions/0088-kept-instance-lists.md) and `pick` fails on it (no such instance, or no single default), the
 * list is read again from the store and `pick` runs once more: an answer of not found or ambiguous is only ever
 * given on a list read for this request's turn.
 * @throws what `pick` throws on the list read afresh; what the store throws.
 */
async function pickAddressable<T>(
  db: Kysely<Database>,
  auth: AuthContext,
  lists: InstanceLists | undefined,
  pick: (candidates: Instance[]) => T,
): Promise<T> {
  const kept = lists?.kept(auth.org.id, auth.env);
  if (kept === undefined) return pick(await addressableInstances(db, auth, lists));
  try {
    return pick(narrowed(auth, kept));
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return pick(await addressableInstances(db, auth, lists, true));
  }
}

/**
 * The instance a request addresses (docs/decisions/0002-instance-resolution.md). Candidates are the key's
 * organization's instances in the key's environment, narrowed by the key's allow-list. `selector` is an instance UUID
 * or a linked phone number. Omitted: the candidate that connected most recently; else the only candidate. `lists`
 * reads the candidates with the other requests of the turn ({@link InstanceLists}); without it they are read alone.
 * @throws DomainError not_found `instance not found` for an unknown or not addressable instance (never 403,
 *   docs/decisions/0002-instance-resolution.md); invalid `several instances: name one with from` when the choice is
 *   ambiguous.
 */
export async function resolveInstance(
  db: Kysely<Database>,
  auth: AuthContext,
  selector: string | undefined,
  lists?: InstanceLists,
): Promise<Instance> {
  return pickAddressable(db, auth, lists, (candidates) => pickInstance(candidates, selector));
}

/**
 * The instance `selector` names among `candidates`, or the default one (docs/decisions/0002-instance-resolution.md).
 * @throws DomainError not_found, invalid, as {@link resolveInstance}.
 */
function pickInstance(candidates: Instance[], selector: string | undefined): Instance {
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
 * Checks an instance name (docs/decisions/0029-instances-over-the-api.md): trimmed, not empty, at most
 * {@link MAX_INSTANCE_NAME} characters. `style` says how the error names the field (`--name` or `name`).
 * @returns the trimmed name.
 * @throws DomainError invalid `name must not be empty`, `name must be at most 60 characters`.
 */
export function parseInstanceName(name: string, style: FieldStyle): string {
  const trimmed = name.trim();
  if (trimmed === '') throw invalidField(style, 'name', ' must not be empty');
  if ([...trimmed].length > MAX_INSTANCE_NAME)
    throw invalidField(style, 'name', ` must be at most ${MAX_INSTANCE_NAME} characters`);
  return trimmed;
}

/**
 * The error of a creation past the plan's cap (docs/decisions/0029-instances-over-the-api.md), e.g. 403 `the free
 * plan allows 2 test instances; this organization has 2`.
 */
function capReached(org: Organization, env: Environment, cap: number, count: number): DomainError {
  const noun = cap === 1 ? 'instance' : 'instances';
  return new DomainError(
    'forbidden',
    `the ${org.plan} plan allows ${cap} ${env} ${noun}; this organization has ${count}`,
  );
}

/**
 * Creates an instance of `org` in `env` within its plan's cap on instances per environment
 * (docs/decisions/0029-instances-over-the-api.md): the one path of the API, the dashboard and the CLI. The name
 * defaults to `<env>-<n>`, n the count of the environment's instances plus one.
 * @throws DomainError forbidden `the <plan> plan allows N <env> instances; this organization has M` at the cap.
 */
async function createWithinPlan(
  db: Kysely<Database>,
  org: Organization,
  env: Environment,
  name: string | undefined,
): Promise<Instance> {
  const cap = instanceCapOf(org);
  const result = await createInstanceWithinCap(db, {
    orgId: org.id,
    env,
    cap,
    name: (count) => name ?? `${env}-${count + 1}`,
  });
  if ('refused' in result) throw capReached(org, env, cap, result.count);
  return result.created;
}

/**
 * Creates an instance of organization `org` (id or name) in `env` (`parley instance create`, the dashboard), within
 * the plan's cap (docs/decisions/0029-instances-over-the-api.md); the name defaults to `<env>-<n>` when omitted or
 * blank. `style` says how errors name the fields (CLI options by default).
 * @throws DomainError not_found for an unknown organization; invalid for an environment other than test or live, or
 *   a name longer than 60 characters; forbidden at the plan's cap.
 */
export async function adminCreateInstance(
  db: Kysely<Database>,
  input: { org: string; env: string; name?: string; style?: FieldStyle },
): Promise<Instance> {
  const style = input.style ?? 'cli';
  const org = await requireOrg(db, input.org);
  const env = parseEnv(input.env, style);
  const blank = input.name === undefined || input.name.trim() === '';
  const name = blank ? undefined : parseInstanceName(input.name ?? '', style);
  return createWithinPlan(db, org, env, name);
}

/**
 * Instances of an organization (id or name) (`parley instance list`, the dashboard), oldest first.
 * @throws DomainError not_found for an unknown organization.
 */
export async function adminListInstances(db: Kysely<Database>, org: string): Promise<Instance[]> {
  return listInstances(db, (await requireOrg(db, org)).id);
}

/** What the {@link InstanceService} is built from. */
export interface InstanceServiceDeps {
  store: Store;
  /** Logs a deleted instance's session out and forgets it. */
  sessions: Pick<SessionManager, 'status' | 'logout' | 'release'>;
  /** The local media store: a deleted instance's files go with it. */
  files: Pick<MediaStore, 'removeInstance'>;
  /**
   * The store's signals (PostgreSQL): with them the instance lists are kept between turns until the store signals
   * a change (docs/decisions/0088-kept-instance-lists.md); without them each turn reads its lists.
   */
  signals?: StoreSignals | undefined;
}

/**
 * The instances requests address (docs/decisions/0002-instance-resolution.md): resolved once per request by the HTTP
 * layer, then handed to the instance-scoped services, which take the {@link Instance} itself. Also the instances
 * family of the API (`/v1/instances`, docs/decisions/0029-instances-over-the-api.md): list, create, rename and
 * delete, in the key's organization and environment.
 */
export class InstanceService {
  readonly #store: Store;
  readonly #sessions: InstanceServiceDeps['sessions'];
  readonly #files: InstanceServiceDeps['files'];
  readonly #lists: InstanceLists;

  constructor(deps: InstanceServiceDeps) {
    this.#store = deps.store;
    this.#lists = new InstanceLists(
      deps.store.db,
      undefined,
      deps.signals === undefined
        ? undefined
        : { signals: deps.signals, ownWrites: (listener) => onInstancesWritten(deps.store.db, listener) },
    );
    this.#sessions = deps.sessions;
    this.#files = deps.files;
  }

  /** See {@link resolveInstance}. */
  resolve(auth: AuthContext, selector: string | undefined): Promise<Instance> {
    return resolveInstance(this.#store.db, auth, selector, this.#lists);
  }

  /**
   * The instance `id` names when `auth` may address it (a path parameter, `/v1/instances/{id}`): a UUID only, never a
   * phone number, and no default.
   * @throws DomainError not_found `instance not found` for anything else (never 403,
   *   docs/decisions/0002-instance-resolution.md).
   */
  async resolveById(auth: AuthContext, id: string): Promise<Instance> {
    if (!UUID.test(id)) throw errors.instanceNotFound();
    const wanted = id.toLowerCase();
    return pickAddressable(this.#store.db, auth, this.#lists, (candidates) => {
      const found = candidates.find((i) => i.id === wanted);
      if (!found) throw errors.instanceNotFound();
      return found;
    });
  }

  /** See {@link loadInstance}: for a caller that has only the id (the CLI, a test). */
  load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }

  /** The instances `auth` may address, oldest first (`GET /v1/instances`). */
  list(auth: AuthContext): Promise<Instance[]> {
    return addressableInstances(this.#store.db, auth);
  }

  /**
   * Creates an instance named `name` in the key's organization and environment (`POST /v1/instances`), within the
   * plan's cap, read from the store at this moment (docs/decisions/0029-instances-over-the-api.md).
   * @throws DomainError forbidden for a key limited to some instances (it could not address the new one) and at the
   *   plan's cap; invalid `name must not be empty` / `name must be at most 60 characters`.
   */
  async create(auth: AuthContext, name: string): Promise<Instance> {
    if (auth.instanceIds.length > 0) {
      throw new DomainError(
        'forbidden',
        'a key limited to some instances cannot create instances (the new one would be outside its list)',
      );
    }
    const checked = parseInstanceName(name, 'api');
    return createWithinPlan(this.#store.db, await requireOrg(this.#store.db, auth.org.id), auth.env, checked);
  }

  /**
   * Renames `instance` (`PATCH /v1/instances/{id}`).
   * @returns the instance as stored now.
   * @throws DomainError invalid on a bad name (see {@link parseInstanceName}); not_found when it was deleted meanwhile.
   */
  async rename(instance: Instance, name: string): Promise<Instance> {
    await updateInstance(this.#store.db, instance.id, { name: parseInstanceName(name, 'api') });
    return loadInstance(this.#store.db, instance.id);
  }

  /**
   * Deletes `instance` (`DELETE /v1/instances/{id}`, docs/decisions/0029-instances-over-the-api.md): when it is
   * logged in or its session runs, logs it out first (as `POST /v1/session/logout`: the device is unlinked when
   * connected, the credentials deleted); closes its session in this process; deletes its row, and with it, by the
   * store's cascading foreign keys, every row of the instance (see src/store/instances.ts `deleteInstance`); then
   * removes its downloaded media files from this process's media store.
   * @throws DomainError not_found when it was deleted meanwhile; the store's and the engine's errors as raised
   *   (the instance then stays, possibly logged out already: deleting again finishes the job).
   */
  async remove(instance: Instance): Promise<void> {
    const status = this.#sessions.status(instance);
    if (status.loggedIn || status.connected) await this.#sessions.logout(instance);
    // Writes of the session still waiting answer as they would once the row is gone: `instance not found`.
    await this.#sessions.release(instance.id, { reason: errors.instanceNotFound() });
    if (!(await deleteInstance(this.#store.db, instance.id))) throw errors.instanceNotFound();
    // A connect that resolved the instance before the delete may have opened a session meanwhile: close it too (a
    // connect finishing after the delete closes its own, SessionManager.connect).
    await this.#sessions.release(instance.id, { reason: errors.instanceNotFound() });
    await this.#files.removeInstance(instance.id);
  }
}
