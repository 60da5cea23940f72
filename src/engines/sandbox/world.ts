import type { GroupInfo, Jid } from '../../domain/messages.ts';
import { atTurnEnd } from '../../ops/turn-end.ts';
import type { AuthEntry, AuthStateStore } from '../engine.ts';
import type { OwnedAuthState } from './owned-state.ts';
import { resolveUser, type SandboxUser, type SandboxUserDefinition } from './users.ts';

/** Auth-port categories of the simulated world (one entry per user phone / group JID). */
export const USERS = 'sandbox-user';
const GROUPS = 'sandbox-group';

/** A group as the simulated platform keeps it: the group fields of docs/api.md#groups plus its invite code. */
export interface StoredGroup extends GroupInfo {
  inviteCode: string;
}

/** A read of user definitions waiting for the end of the turn: the phones it needs and where its answer goes. */
interface UserRead {
  phones: readonly string[];
  resolve: (defined: ReadonlyMap<string, string>) => void;
  reject: (error: unknown) => void;
}

/** What the session keeps of its auth port, answered at once ({@link OwnedAuthState.peek} in owned-state.ts). */
export interface KeptEntries {
  /** The values of `ids` of `category` when every one is kept (absent ones left out), else undefined. */
  peek(category: string, ids: readonly string[]): ReadonlyMap<string, string> | undefined;
}

/**
 * The persistent part of an instance's simulated platform (docs/decisions/0004-sandbox.md): users defined through
 * `/v1/sandbox/users` and every group the world knows. Stored through the session's auth port (sealed like
 * credentials, survives restarts and logout) and read on demand; the session's port keeps the user definitions it
 * read or wrote (owned-state.ts), groups are read each time.
 * The user reads of one turn of the event loop share one store read at its end
 * (docs/decisions/0049-turn-batched-reads.md): concurrent sends to one instance check their recipients together. A
 * read whose users the session keeps every one of is answered at once, without waiting for the turn's end.
 */
export class SandboxWorld {
  readonly #auth: AuthStateStore;
  readonly #kept: KeptEntries | undefined;
  /** User reads asked during this turn, answered together at its end. */
  #reads: UserRead[] = [];

  /** Reads and writes through `auth`; `kept` answers the user reads it holds every user of (the session's own). */
  constructor(auth: AuthStateStore, kept?: KeptEntries) {
    this.#auth = auth;
    this.#kept = kept;
  }

  /** User `phone` with its definition applied (docs/decisions/0004-sandbox.md rules otherwise). */
  async user(phone: string): Promise<SandboxUser> {
    const [user] = await this.users([phone]);
    return user ?? resolveUser(phone, undefined);
  }

  /**
   * Users `phones`, in order: from what the session keeps when it keeps every one of them; else read with every
   * other user read of this turn, in one store read at the turn's end (a read starts after every call it answers,
   * so it sees every definition stored before them).
   * @throws the store's error, for every call of the turn.
   */
  async users(phones: readonly string[]): Promise<SandboxUser[]> {
    const defined =
      this.#kept?.peek(USERS, phones) ??
      (await new Promise<ReadonlyMap<string, string>>((resolve, reject) => {
        this.#reads.push({ phones, resolve, reject });
        if (this.#reads.length === 1) atTurnEnd(() => this.#readTurn());
      }));
    return phones.map((phone) => resolveUser(phone, parseDefinition(defined.get(phone))));
  }

  /** Reads the definitions of every phone the turn's user reads asked for, and answers each read. */
  #readTurn(): void {
    const reads = this.#reads;
    this.#reads = [];
    const phones = [...new Set(reads.flatMap((read) => read.phones))];
    this.#auth.get(USERS, phones).then(
      (defined) => {
        for (const read of reads) read.resolve(defined);
      },
      (error: unknown) => {
        for (const read of reads) read.reject(error);
      },
    );
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
    await this.#auth.set([groupEntry(group)]);
  }
}

/**
 * The auth-port entry that stores `group` (creates or replaces it), for a write that commits with events
 * (`emitWith` of the session's context, docs/decisions/0077-state-with-its-events.md).
 */
export function groupEntry(group: StoredGroup): AuthEntry {
  return { category: GROUPS, id: group.jid, value: JSON.stringify(group) };
}

function parseDefinition(value: string | undefined): SandboxUserDefinition | undefined {
  return value === undefined ? undefined : (JSON.parse(value) as SandboxUserDefinition);
}
