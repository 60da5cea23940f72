import type { RegistrationCache } from '../contacts/registration-cache.ts';
import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { type LidMapping, lidJid } from '../domain/lids.ts';
import type { Avatar, Contact, UserCheck, UserInfo } from '../domain/messages.ts';
import { phoneOfJid } from '../domain/messages.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findLidMappingByLid, findLidMappingByPhone } from '../store/lid-mappings.ts';
import { listChatPeers } from '../store/messages.ts';

/**
 * The contacts family (docs/api.md#contacts). Every method needs the instance logged in and connected
 * (@throws DomainError not_logged_in / not_connected, docs/decisions/0001-envelope-and-error-codes.md) and passes
 * platform errors on.
 */
export class ContactService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #registrations: RegistrationCache;

  constructor(deps: { store: Store; sessions: SessionManager; registrations: RegistrationCache }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#registrations = deps.registrations;
  }

  /**
   * Which phone numbers are registered, one entry per number in order. Answers come from the registration cache
   * shared with the sends' check (docs/decisions/0001-envelope-and-error-codes.md), so numbers checked here spare
   * later lookups.
   */
  async check(instance: Instance, phones: readonly string[]): Promise<UserCheck[]> {
    const session = this.#sessions.ready(instance);
    return this.#registrations.check(instance.id, phones, (missing) => session.checkPhones(missing));
  }

  /**
   * The account's contacts: the platform's, then every user the instance exchanged messages with (stored chat
   * peers, with their display name), unordered and possibly repeated (the caller merges by JID).
   */
  async list(instance: Instance): Promise<Contact[]> {
    const platform = await this.#sessions.ready(instance).contacts();
    const peers = (await listChatPeers(this.#store.db, instance.id))
      .filter((peer) => phoneOfJid(peer.jid) !== null)
      .map((peer) => ({
        jid: peer.jid,
        businessName: '',
        firstName: '',
        fullName: '',
        pushName: peer.pushName,
      }));
    return [...platform, ...peers];
  }

  /**
   * Profile details of the users with these phone numbers (docs/api.md#contacts), one entry per distinct number
   * found.
   */
  async info(instance: Instance, phones: readonly string[]): Promise<UserInfo[]> {
    return this.#sessions.ready(instance).userInfo(phones);
  }

  /** The profile picture of a user, or null when it has none (docs/api.md#contacts). */
  async avatar(instance: Instance, phone: string): Promise<Avatar | null> {
    return this.#sessions.ready(instance).avatar(phone);
  }

  /**
   * The phone↔LID pair of LID `lid` or phone number `phone` (digits only) (docs/decisions/0038-lid-mappings.md):
   * the stored pair (`lid_mappings`) when there is one, else, when the instance's session is logged in and
   * connected and its engine can ask, the engine's answer (which the engine records as a `lid-mapping` event, so
   * the next lookup is a store read). Needs no connection when the pair is stored.
   * @throws DomainError not_found `no LID mapping known for <lid>@lid` / `… for <phone>` when neither knows it;
   *   the engine's errors as raised.
   */
  async lidMapping(instance: Instance, query: { lid: string } | { phone: string }): Promise<LidMapping> {
    const db = this.#store.db;
    const stored =
      'lid' in query
        ? await findLidMappingByLid(db, instance.id, query.lid)
        : await findLidMappingByPhone(db, instance.id, query.phone);
    if (stored) return { lid: stored.lid, phone: stored.phone };
    const session = this.#sessions.existing(instance.id);
    const state = session?.state();
    if (session?.lidMapping && state?.loggedIn && state.connected) {
      const found = await session.lidMapping(query);
      if (found) return found;
    }
    throw errors.notFound(`no LID mapping known for ${'lid' in query ? lidJid(query.lid) : query.phone}`);
  }
}
