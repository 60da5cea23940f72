import { DomainError, errors } from '../domain/errors.ts';
import type { Instance, InstanceId } from '../domain/instance.ts';
import type { GroupInfo, Jid } from '../domain/messages.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { loadInstance } from './instances.ts';

/** Rewrites the engine's group errors into the API's messages: unknown group, not an admin (SPEC Errors). */
function groupError(groupJid: string, error: unknown): unknown {
  if (!(error instanceof DomainError)) return error;
  if (error.code === 'not_found') return errors.notFound(`group ${groupJid} not found`);
  if (error.code === 'forbidden') {
    return new DomainError('forbidden', 'you must be a group admin to get the invite link');
  }
  return error;
}

/**
 * The groups family (SPEC Groups). Every method needs the instance logged in and connected
 * (@throws DomainError not_logged_in / not_connected, DESIGN D6) and passes platform errors on.
 */
export class GroupService {
  readonly #store: Store;
  readonly #sessions: SessionManager;

  constructor(deps: { store: Store; sessions: SessionManager }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
  }

  /** The instance the call addresses, read by id. @throws DomainError not_found `instance not found`. */
  #load(instanceId: InstanceId): Promise<Instance> {
    return loadInstance(this.#store.db, instanceId);
  }

  /** Creates a group with `participants` (user JIDs, the account left out by the engine). */
  async create(instanceId: InstanceId, name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    const instance = await this.#load(instanceId);
    return this.#sessions.ready(instance).createGroup(name, participants);
  }

  /** Every group the account belongs to. */
  async list(instanceId: InstanceId): Promise<GroupInfo[]> {
    const instance = await this.#load(instanceId);
    return this.#sessions.ready(instance).listGroups();
  }

  /** One group. @throws DomainError not_found `group <jid> not found`. */
  async info(instanceId: InstanceId, groupJid: Jid): Promise<GroupInfo> {
    const instance = await this.#load(instanceId);
    const session = this.#sessions.ready(instance);
    return session.groupInfo(groupJid).catch((error: unknown) => {
      throw groupError(groupJid, error);
    });
  }

  /**
   * The invite code of a group.
   * @throws DomainError not_found `group <jid> not found`; forbidden when the account is not an admin.
   */
  async inviteCode(instanceId: InstanceId, groupJid: Jid): Promise<string> {
    const instance = await this.#load(instanceId);
    const session = this.#sessions.ready(instance);
    return session.groupInviteCode(groupJid).catch((error: unknown) => {
      throw groupError(groupJid, error);
    });
  }
}
