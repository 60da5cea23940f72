import { DomainError, errors } from '../../domain/errors.ts';
import type { GroupInfo, GroupParticipant, Jid } from '../../domain/messages.ts';
import { phoneOfJid, userJid } from '../../domain/messages.ts';
import type { SandboxForeignGroupInput } from '../engine.ts';
import { ownJid, type SandboxAccount } from './account.ts';
import { groupJidFor, inviteCodeFor } from './ids.ts';
import type { StoredGroup } from './world.ts';

/** Longest group name the platform accepts, characters (docs/api.md#groups). */
export const MAX_GROUP_NAME = 25;

/**
 * The group fields of docs/api.md#groups for a stored group (the invite code stays inside the simulated platform).
 */
export function groupInfoOf(group: StoredGroup): GroupInfo {
  const { inviteCode: _inviteCode, ...info } = group;
  return { ...info, participants: info.participants.map((p) => ({ ...p })) };
}

/** True when user JID `jid` is a participant of `group`. */
export function isMember(group: StoredGroup, jid: Jid): boolean {
  return group.participants.some((p) => p.jid === jid);
}

/**
 * Group `jid` as seen by the account: it must be a participant.
 * @throws DomainError not_found `group not found` when the world has no such group or the account is not in it.
 */
export async function memberGroup(account: SandboxAccount, me: Jid, jid: Jid): Promise<StoredGroup> {
  const group = await account.world.group(jid);
  if (!group || !isMember(group, me)) throw errors.notFound('group not found');
  return group;
}

function checkName(name: string): void {
  if (name.trim() === '') throw errors.badRequest('name must not be empty');
  if ([...name].length > MAX_GROUP_NAME) {
    throw errors.badRequest(`name must be at most ${MAX_GROUP_NAME} characters`);
  }
}

async function newGroup(
  account: SandboxAccount,
  name: string,
  owner: Jid,
  members: readonly { jid: Jid; admin: boolean }[],
): Promise<StoredGroup> {
  const jid = groupJidFor(account.context.instanceId, await account.sequence.next());
  const created = account.context.clock();
  const participants: GroupParticipant[] = [{ jid: owner, isAdmin: true, isSuperAdmin: true }];
  for (const member of members) {
    if (participants.some((p) => p.jid === member.jid)) continue;
    participants.push({ jid: member.jid, isAdmin: member.admin, isSuperAdmin: false });
  }
  const group: StoredGroup = {
    jid,
    name,
    topic: '',
    ownerJid: owner,
    created,
    nameSetAt: created,
    nameSetBy: owner,
    isAnnounce: false,
    isLocked: false,
    isEphemeral: false,
    disappearingTimer: 0,
    participants,
    inviteCode: inviteCodeFor(account.context.instanceId, jid),
  };
  await account.world.saveGroup(group);
  return group;
}

/**
 * Creates a group owned by the account (docs/api.md#groups): the account is owner, admin and super admin; the other
 * participants are plain members. As on the platform, numbers that are not registered are left out rather than
 * failing the whole creation; duplicates and the account itself are ignored.
 * @throws DomainError invalid for an empty name, a name over 25 characters or a participant that is not a
 *   user JID; not_logged_in before login.
 */
export async function createGroup(
  account: SandboxAccount,
  name: string,
  participants: readonly Jid[],
): Promise<GroupInfo> {
  const me = ownJid(await account.ready());
  checkName(name);
  const phones = participants.map((jid, i) => {
    const phone = phoneOfJid(jid);
    if (phone === null) throw errors.badRequest(`participants[${i}] must be a user JID`);
    return phone;
  });
  const users = await account.world.users(phones);
  const members = users.filter((u) => u.registered).map((u) => ({ jid: userJid(u.phone), admin: false }));
  return groupInfoOf(await newGroup(account, name, me, members));
}

/** Every group the account belongs to, oldest first. @throws DomainError conflict before login. */
export async function listGroups(account: SandboxAccount): Promise<GroupInfo[]> {
  const me = ownJid(await account.ready());
  const groups = await account.world.groups();
  return groups.filter((g) => isMember(g, me)).map(groupInfoOf);
}

/** One group. @throws DomainError not_found `group not found` when the account is not in it; not_logged_in before login. */
export async function groupInfo(account: SandboxAccount, jid: Jid): Promise<GroupInfo> {
  const me = ownJid(await account.ready());
  return groupInfoOf(await memberGroup(account, me, jid));
}

/**
 * The invite code of a group (docs/api.md#groups: caller must be an admin).
 * @throws DomainError not_found `group not found`; forbidden `you must be a group admin to get the invite link`
 *   (docs/api.md#errors); not_logged_in before login.
 */
export async function groupInviteCode(account: SandboxAccount, jid: Jid): Promise<string> {
  const me = ownJid(await account.ready());
  const group = await memberGroup(account, me, jid);
  const self = group.participants.find((p) => p.jid === me);
  if (!self?.isAdmin) throw new DomainError('forbidden', 'you must be a group admin to get the invite link');
  return group.inviteCode;
}

/**
 * Sandbox helper (docs/decisions/0004-sandbox.md): a group created by `ownerPhone` with `participants` and the
 * account as plain members. Unlike {@link createGroup} every named number must be registered, since the helper's
 * caller asked for exactly these members.
 * @throws DomainError invalid for a bad name or when the owner is the account itself; not_registered naming
 *   the first number that is not registered; not_logged_in before login.
 */
export async function createForeignGroup(
  account: SandboxAccount,
  input: SandboxForeignGroupInput,
): Promise<GroupInfo> {
  const creds = await account.ready();
  const me = ownJid(creds);
  checkName(input.name);
  if (input.ownerPhone === creds.phone) {
    throw errors.badRequest('ownerPhone must be another user than this instance');
  }
  const users = await account.world.users([input.ownerPhone, ...input.participants]);
  for (const [i, user] of users.entries()) {
    if (user.phone === creds.phone || user.registered) continue;
    const field = i === 0 ? 'ownerPhone' : `participant`;
    throw new DomainError('not_registered', `${field} ${user.phone} is not registered on the platform`);
  }
  const owner = userJid(input.ownerPhone);
  const members = [
    ...input.participants.map((phone) => ({ jid: userJid(phone), admin: false })),
    { jid: me, admin: false },
  ];
  return groupInfoOf(await newGroup(account, input.name, owner, members));
}
