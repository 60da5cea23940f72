import type { GroupInfo, Jid } from '../../domain/messages.ts';
import type { AuthStateStore } from '../engine.ts';
import { resolveUser, type SandboxUser, type SandboxUserDefinition } from './users.ts';

/** Auth-port categories of the simulated world (one entry per user phone / group JID). */
const USERS = 'sandbox-user';
const GROUPS = 'sandbox-group';

/** A group as the simulated platform keeps it: the group fields of docs/api.md#groups plus its invite code. */
export interface StoredGroup extends GroupInfo {
  inviteCode: string;
}

/**
 * The persistent part of an instance's simulated platform (docs/decisions/0004-sandbox.md): users defined through
 * `/v1/sandbox/users` and every group the world knows. Stored through the session's auth port (sealed like
 * credentials, survives restarts and logout) and read on demand, never cached: an idle instance holds nothing.
 */
export class SandboxWorld {
  readonly #auth: AuthStateStore;

  constructor(auth: AuthStateStore) {
    this.#auth = auth;
  }

  /** User `phone` with its definition applied (docs/decisions/0004-sandbox.md rules otherwise). */
  async user(phone: string): Promise<SandboxUser> {
    const [user] = await this.users([phone]);
    return user ?? resolveUser(phone, undefined);
  }

  /** Users `phones`, in order (one store read for all of them). */
  async users(phones: readonly string[]): Promise<SandboxUser[]> {
    const unique = [...new Set(phones)];
    const defined = await this.#auth.get(USERS, unique);
    return phones.map((phone) => resolveUser(phone, parseDefinition(defined.get(phone))));
  }

  /** Every user defined through `/v1/sandbox/users`, ordered by phone. */
  async definedUsers(): Promise<SandboxUser[]> {
    const all = await this.#auth.list(USERS);
    return [...all.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([phone, value]) => resolveUser(phone, parseDefinition(value)));
  }

  /** Defines (replaces) user `phone`. */
  async defineUser(phone: string, definition: SandboxUserDefinition): Promise<void> {
    await this.#auth.set([{ category: USERS, id: phone, value: JSON.stringify(definition) }]);
  }

  /** Group `jid`, or undefined when the world has no such group. */
  async group(jid: Jid): Promise<StoredGroup | undefined> {
    const value = (await this.#auth.get(GROUPS, [jid])).get(jid);
    return value === undefined ? undefined : (JSON.parse(value) as StoredGroup);
  }

  /** Every group of the world, oldest first. */
  async groups(): Promise<StoredGroup[]> {
    const all = await this.#auth.list(GROUPS);
    return [...all.values()]
      .map((value) => JSON.parse(value) as StoredGroup)
      .sort((a, b) => a.created - b.created || a.jid.localeCompare(b.jid));
  }

  /** Stores (creates or replaces) a group. */
  async saveGroup(group: StoredGroup): Promise<void> {
    await this.#auth.set([{ category: GROUPS, id: group.jid, value: JSON.stringify(group) }]);
  }
}

function parseDefinition(value: string | undefined): SandboxUserDefinition | undefined {
  return value === undefined ? undefined : (JSON.parse(value) as SandboxUserDefinition);
}
