import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { GroupInfo, Jid } from '../domain/messages.ts';
import type { SessionManager } from '../sessions/manager.ts';

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
  readonly #sessions: SessionManager;

  constructor(deps: { sessions: SessionManager }) {
    this.#sessions = deps.sessions;
  }

  /** Creates a group with `participants` (user JIDs, the account left out by the engine). */
  create(instance: Instance, name: string, participants: readonly Jid[]): Promise<GroupInfo> {
    return this.#sessions.ready(instance).createGroup(name, participants);
  }

  /** Every group the account belongs to. */
  list(instance: Instance): Promise<GroupInfo[]> {
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
}
