/**
 * The simulator's groups: a group JID (`<digits>@g.us`), a subject, a creator, members with their role
 * (`superadmin` for the creator, `admin`, or plain member), an invite code, and which member devices already
 * hold each sender's sender key (the platform keeps no such memory; every sender does, as Baileys'
 * `sender-key-memory`: the simulator keeps it for the simulated members' phones). Groups are LID-addressed,
 * as the platform creates them today: members are named by LID with their phone number beside it (Baileys
 * Socket/groups.js extractGroupMetadata reads `addressing_mode="lid"`, `phone_number`, `creator_pn`, `s_o_pn`).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { type Accounts, ModelError, type User } from './accounts.ts';

/** The group server of JIDs (`<id>@g.us`). */
export const GROUP_SERVER = 'g.us';

/** A member's role, as the `type` attribute of `<participant>` (none for a plain member). */
export type GroupRole = 'superadmin' | 'admin' | 'member';

/** One member of a group. */
export interface GroupMember {
  user: User;
  role: GroupRole;
}

/** A simulated group. Times are Unix seconds, as the platform writes them. */
export interface Group {
  /** `<digits>@g.us`. */
  jid: string;
  subject: string;
  /** Who set the subject (the creator at creation), and when (s). */
  subjectOwner: User;
  subjectTime: number;
  creator: User;
  /** Creation time (s). */
  creation: number;
  /** Members by phone, in the order they joined (the creator first). */
  members: Map<string, GroupMember>;
  /** The current invite code (22 characters of [A-Za-z0-9]); the link is `https://chat.whatsapp.com/<code>`. */
  inviteCode: string;
  /** The description ('' when none), its id and who set it when (s); model/group-admin.ts changes these. */
  description: string;
  descriptionId?: string;
  descriptionOwner?: User;
  descriptionTime?: number;
  /** Only admins send messages (`<announcement/>`). */
  announce: boolean;
  /** Only admins edit the group info (`<locked/>`). */
  locked: boolean;
  /** Disappearing-message timer in seconds, 0 when off (`<ephemeral expiration/>`). */
  ephemeral: number;
  /**
   * Sender-key memory of simulated members: for each sending phone, the device JIDs its sender key was
   * already distributed to (they get only the `skmsg` afterwards).
   */
  senderKeySent: Map<string, Set<string>>;
}

const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A fresh invite code: 22 characters of [A-Za-z0-9], as the platform's invite links carry. */
export function newInviteCode(): string {
  return [...randomBytes(22)].map((b) => CODE_ALPHABET[b % CODE_ALPHABET.length]).join('');
}

/** Maximum subject length the platform accepts (characters). */
export const MAX_SUBJECT = 100;

/** Every group of one simulator, by JID. */
export class Groups {
  private readonly byJid = new Map<string, Group>();

  /**
   * Creates a group with `creator` as super admin and `members` (deduplicated, the creator left out) as plain
   * members. Throws ModelError 400 for an empty or too long subject, or when a member is not registered.
   */
  create(creator: User, subject: string, members: readonly User[], now = Date.now()): Group {
    if (subject.trim() === '' || [...subject].length > MAX_SUBJECT) {
      throw new ModelError(400, `subject must be 1 to ${MAX_SUBJECT} characters`);
    }
    let jid: string;
    do
      jid = `120363${String(randomInt(1e6, 1e7))}${String(randomInt(0, 1e6)).padStart(6, '0')}@${GROUP_SERVER}`;
    while (this.byJid.has(jid));
    const seconds = Math.floor(now / 1000);
    const group: Group = {
      jid,
      subject,
      subjectOwner: creator,
      subjectTime: seconds,
      creator,
      creation: seconds,
      members: new Map([[creator.phone, { user: creator, role: 'superadmin' }]]),
      inviteCode: newInviteCode(),
      description: '',
      announce: false,
      locked: false,
      ephemeral: 0,
      senderKeySent: new Map(),
    };
    for (const user of members) {
      if (!user.registered) throw new ModelError(400, `participant ${user.phone} is not registered`);
      if (!group.members.has(user.phone)) group.members.set(user.phone, { user, role: 'member' });
    }
    this.byJid.set(jid, group);
    return group;
  }

  /** The group with this JID, or undefined. */
  get(jid: string): Group | undefined {
    return this.byJid.get(jid);
  }

  /** The group with this JID; throws ModelError 404 naming `field` when there is none. */
  require(jid: string, field: string): Group {
    const group = this.byJid.get(jid);
    if (!group) throw new ModelError(404, `${field}: no simulated group ${jid}`);
    return group;
  }

  /** The group whose current invite code is `code`, or undefined (never issued, or revoked). */
  byInviteCode(code: string): Group | undefined {
    return [...this.byJid.values()].find((g) => g.inviteCode === code);
  }

  /** Every group, in creation order. */
  all(): Group[] {
    return [...this.byJid.values()];
  }

  /** Puts back a group read from the state file (model/group-state.ts). Throws ModelError 409 when its JID exists. */
  restore(group: Group): void {
    if (this.byJid.has(group.jid)) throw new ModelError(409, `group ${group.jid} exists already`);
    this.byJid.set(group.jid, group);
  }

  /** The groups `user` belongs to, in creation order. */
  of(user: User): Group[] {
    return [...this.byJid.values()].filter((g) => g.members.has(user.phone));
  }
}

/** True when `user` is an admin (or the super admin) of `group`. */
export function isAdmin(group: Group, user: User): boolean {
  const role = group.members.get(user.phone)?.role;
  return role === 'admin' || role === 'superadmin';
}

const registry = new WeakMap<Accounts, Groups>();

/**
 * The groups of the simulated platform whose users are `accounts` (one {@link Groups} per simulator, created on
 * first use): group queries and control routes reach them through the accounts they already hold.
 */
export function groupsOf(accounts: Accounts): Groups {
  let groups = registry.get(accounts);
  if (!groups) {
    groups = new Groups();
    registry.set(accounts, groups);
  }
  return groups;
}
