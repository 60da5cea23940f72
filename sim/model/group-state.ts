/**
 * Groups in the simulator's state file (model/state.ts): a group as plain data, with its users named by phone, so
 * a simulator restarted with its state directory still has every group, its members and roles, its invite code,
 * settings and the sender-key memory of its simulated members.
 */
import { type Accounts, ModelError, type User } from './accounts.ts';
import { type Group, type GroupRole, groupsOf } from './groups.ts';

/** A {@link Group} as the state file keeps it: users by phone. */
export type SavedGroup = Omit<Group, 'subjectOwner' | 'creator' | 'descriptionOwner' | 'members'> & {
  subjectOwner: string;
  creator: string;
  descriptionOwner?: string;
  /** `[phone, role]` in the order the members joined. */
  members: [string, GroupRole][];
};

/** Every group of `accounts`' simulator, as plain data. */
export function saveGroups(accounts: Accounts): SavedGroup[] {
  return groupsOf(accounts)
    .all()
    .map(({ subjectOwner, creator, descriptionOwner, members, ...rest }) => ({
      ...rest,
      subjectOwner: subjectOwner.phone,
      creator: creator.phone,
      ...(descriptionOwner ? { descriptionOwner: descriptionOwner.phone } : {}),
      members: [...members.values()].map((m): [string, GroupRole] => [m.user.phone, m.role]),
    }));
}

/**
 * Puts `saved` groups back into `accounts`' simulator; their users must be restored first.
 * @throws ModelError 404 naming the group and the phone when a member is not a restored user; 409 for a duplicate.
 */
export function restoreGroups(saved: readonly SavedGroup[], accounts: Accounts): void {
  const groups = groupsOf(accounts);
  for (const group of saved) {
    const user = (phone: string): User => {
      const found = accounts.get(phone);
      if (!found) throw new ModelError(404, `group ${group.jid} names ${phone}, who is no user`);
      return found;
    };
    const { subjectOwner, creator, descriptionOwner, members, ...rest } = group;
    groups.restore({
      ...rest,
      subjectOwner: user(subjectOwner),
      creator: user(creator),
      ...(descriptionOwner !== undefined ? { descriptionOwner: user(descriptionOwner) } : {}),
      members: new Map(members.map(([phone, role]) => [phone, { user: user(phone), role }])),
    });
  }
}
