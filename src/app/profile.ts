import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { AccountProfile, PrivacyChange, PrivacySettings, ProfileChange } from '../domain/profile.ts';
import type { AccountCapability, EngineSession } from '../engines/engine.ts';
import type { SessionManager } from '../sessions/manager.ts';

/**
 * The account's own profile, privacy settings and blocklist (docs/api.md#profile,
 * docs/decisions/0039-profile-privacy-blocklist.md). Every method needs the instance logged in and connected
 * (@throws DomainError not_logged_in / not_connected / platform_unreachable, as every platform call,
 * docs/decisions/0001-envelope-and-error-codes.md) and passes the engine's errors on.
 */
export class ProfileService {
  readonly #sessions: SessionManager;

  constructor(deps: { sessions: SessionManager }) {
    this.#sessions = deps.sessions;
  }

  /** The account's name, about text and picture URL. */
  async profile(instance: Instance): Promise<AccountProfile> {
    return account(this.#sessions.ready(instance)).profile();
  }

  /** Applies the changes (already validated and, for a picture, fetched and checked) and returns the new profile. */
  async updateProfile(instance: Instance, change: ProfileChange): Promise<AccountProfile> {
    return account(this.#sessions.ready(instance)).updateProfile(change);
  }

  /** The account's privacy settings. */
  async privacy(instance: Instance): Promise<PrivacySettings> {
    return account(this.#sessions.ready(instance)).privacy();
  }

  /** Changes the given privacy settings (values already checked) and returns them all. */
  async updatePrivacy(instance: Instance, change: PrivacyChange): Promise<PrivacySettings> {
    return account(this.#sessions.ready(instance)).updatePrivacy(change);
  }

  /** The phone numbers the account blocked, ascending. */
  async blocklist(instance: Instance): Promise<string[]> {
    return account(this.#sessions.ready(instance)).blocklist();
  }

  /**
   * Blocks or unblocks user `phone` and returns the blocklist afterwards.
   * @throws DomainError not_registered when `phone` is not on the platform; invalid when it is the account.
   */
  async setBlocked(instance: Instance, phone: string, action: 'block' | 'unblock'): Promise<string[]> {
    return account(this.#sessions.ready(instance)).setBlocked(phone, action);
  }
}

/** The session's account capability. @throws DomainError platform_refused when its engine has none. */
function account(session: EngineSession): AccountCapability {
  const { profile, updateProfile, privacy, updatePrivacy, blocklist, setBlocked } = session;
  if (!profile || !updateProfile || !privacy || !updatePrivacy || !blocklist || !setBlocked) {
    throw new DomainError('platform_refused', 'this engine does not manage the account profile');
  }
  return {
    profile: profile.bind(session),
    updateProfile: updateProfile.bind(session),
    privacy: privacy.bind(session),
    updatePrivacy: updatePrivacy.bind(session),
    blocklist: blocklist.bind(session),
    setBlocked: setBlocked.bind(session),
  };
}
