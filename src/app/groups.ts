import { DomainError, errors } from '../domain/errors.ts';
import {
  checkGroupChange,
  type GroupChange,
  type ParticipantAction,
  type ParticipantOutcome,
} from '../domain/groups.ts';
import type { Instance } from '../domain/instance.ts';
import type { GroupInfo, Jid } from '../domain/messages.ts';
import type { SessionManager } from '../sessions/manager.ts';

/** Rewrites the engine's group errors into the API's messages: unknown group, not an admin (docs/api.md#errors). */
function groupError(groupJid: string, error: unknown): unknown {
  if (!(error instanceof DomainError)) return error;
  if (error.code === 'not_found') return errors.notFound(`group ${groupJid} not found`);
  if (error.code === 'forbidden') {
    return new DomainError('forbidden', 'you must be a group admin to get the invite link');
  }
  return error;
}

/** Rewrites an administration error: an unknown group gets its JID named; forbidden keeps the engine's words. */
function adminError(groupJid: string, error: unknown): unknown {
  if (error instanceof DomainError && error.code === 'not_found' && error.message === 'group not found') {
    return errors.notFound(`group ${groupJid} not found`);
  }
  return error;
}

/**
 * The groups family (docs/api.md#groups). Every method needs the instance logged in and connected
 * (@throws DomainError not_logged_in / not_connected, docs/decisions/0001-envelope-and-error-codes.md) and passes
 * platform errors on.
 */
export class GroupService {
  readonly #sessions: SessionManager;

  constructor(deps: { sessions: SessionManager }) {
    this.#sessions = deps.sessions;
  }

  /** Creates a group with `participants` (user JIDs, the account left out by the engine). */
  async create(instance: Instance, name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    return this.#sessions.ready(instance).createGroup(name, participants);
  }

  /** Every group the account belongs to. */
  async list(instance: Instance): Promise<GroupInfo[]> {
    return this.#sessions.ready(instance).listGroups();
  }

  /** One group. @throws DomainError not_found `group <jid> not found`. */
  async info(instance: Instance, groupJid: Jid): Promise<GroupInfo> {
    const session = this.#sessions.ready(instance);
    return session.groupInfo(groupJid).catch((error: unknown) => {
      throw groupError(groupJid, error);
    });
  }

  /**
   * The invite code of a group.
   * @throws DomainError not_found `group <jid> not found`; forbidden when the account is not an admin.
   */
  async inviteCode(instance: Instance, groupJid: Jid): Promise<string> {
    const session = this.#sessions.ready(instance);
    return session.groupInviteCode(groupJid).catch((error: unknown) => {
      throw groupError(groupJid, error);
    });
  }

  /**
   * Adds, removes, promotes or demotes `participants` (user JIDs) of group `groupJid`; one outcome per
   * participant with the platform's code. A `group` event follows for those done.
   * @throws DomainError not_found `group <jid> not found`; forbidden when the account is not an admin.
   */
  async updateParticipants(
    instance: Instance,
    groupJid: Jid,
    action: ParticipantAction,
    participants: readonly Jid[],
  ): Promise<ParticipantOutcome[]> {
    const session = this.#sessions.ready(instance);
    return session.updateParticipants(groupJid, action, participants).catch((error: unknown) => {
      throw adminError(groupJid, error);
    });
  }

  /**
   * Changes the name, topic and settings of a group, then answers the group with every field.
   * @throws DomainError invalid for a value the platform refuses; not_found; forbidden when the account may not
   *   make the change.
   */
  async update(instance: Instance, groupJid: Jid, change: GroupChange): Promise<GroupInfo> {
    checkGroupChange(change);
    const session = this.#sessions.ready(instance);
    try {
      await session.updateGroup(groupJid, change);
      return await session.groupInfo(groupJid);
    } catch (error) {
      throw adminError(groupJid, error);
    }
  }

  /** The account leaves a group. @throws DomainError not_found `group <jid> not found`. */
  async leave(instance: Instance, groupJid: Jid): Promise<void> {
    const session = this.#sessions.ready(instance);
    await session.leaveGroup(groupJid).catch((error: unknown) => {
      throw adminError(groupJid, error);
    });
  }

  /**
   * Joins a group by invite code and answers the group's JID.
   * @throws DomainError not_found when no group has this code (unknown or revoked).
   */
  async join(instance: Instance, code: string): Promise<Jid> {
    const session = this.#sessions.ready(instance);
    return session.joinGroup(code);
  }

  /**
   * Revokes a group's invite code and answers the new one.
   * @throws DomainError not_found `group <jid> not found`; forbidden when the account is not an admin.
   */
  async revokeInvite(instance: Instance, groupJid: Jid): Promise<string> {
    const session = this.#sessions.ready(instance);
    return session.revokeGroupInvite(groupJid).catch((error: unknown) => {
      throw adminError(groupJid, error);
    });
  }
}
