import { DomainError, errors } from '../../domain/errors.ts';
import {
  adminNeededFor,
  checkGroupChange,
  type GroupChange,
  type ParticipantAction,
  type ParticipantOutcome,
} from '../../domain/groups.ts';
import type { GroupInfo, GroupUpdate, Jid } from '../../domain/messages.ts';
import { phoneOfJid, userJid } from '../../domain/messages.ts';
import type { SandboxGroupChangeInput } from '../engine.ts';
import { changeSerially, ownJid, type SandboxAccount } from './account.ts';
import { groupInfoOf, isMember, memberGroup } from './groups.ts';
import { inviteCodeFor } from './ids.ts';
import { groupEntry, type StoredGroup } from './world.ts';

/**
 * Group administration on the simulated platform (docs/decisions/0004-sandbox.md), with the platform's rules: only
 * admins add, remove, promote and demote, and change the announce and locked settings; the name, topic and
 * disappearing timer may be changed by any member unless the group is locked. Every change is saved and reported as
 * a `group` event, as the platform's `w:gp2` notification reaches every member (the account included, whoever made
 * the change); a change and its events are kept together or not at all ({@link saveReported}). Per-participant
 * codes follow the platform's (src/domain/groups.ts).
 */

const isAdminIn = (group: StoredGroup, jid: Jid): boolean =>
  group.participants.some((p) => p.jid === jid && p.isAdmin);

/**
 * Saves `group` and records `updates`, its events, in order, in one transaction (the session's `emitWith`,
 * docs/decisions/0077-state-with-its-events.md): the sandbox's relay is its recording
 * (docs/decisions/0024-engines-and-data-flow.md), so a change is kept with its events or, when they cannot be
 * recorded, not at all, and the change made again is made and reported then (kept, a join made again would be
 * refused as done, its event never recorded). The events share one timestamp: they report one change.
 * @throws the recording's or the store's error (the group as it was).
 */
async function saveReported(
  account: SandboxAccount,
  group: StoredGroup,
  updates: readonly Omit<GroupUpdate, 'timestamp'>[],
): Promise<void> {
  const timestamp = account.context.clock();
  await account.context.emitWith(
    [groupEntry(group)],
    updates.map((update) => ({ type: 'group', update: { ...update, timestamp } })),
  );
}

/** Applies one participant action by `actor` to `group` (in place); returns the code per participant. */
async function applyParticipants(
  account: SandboxAccount,
  group: StoredGroup,
  action: ParticipantAction,
  jids: readonly Jid[],
): Promise<ParticipantOutcome[]> {
  const phones = jids.map((jid) => phoneOfJid(jid) ?? '');
  const users = await account.world.users(phones.filter((p) => p !== ''));
  const registered = new Set(users.filter((u) => u.registered).map((u) => u.phone));
  return jids.map((jid) => {
    const member = group.participants.find((p) => p.jid === jid);
    const phone = phoneOfJid(jid);
    if (action === 'add') {
      if (phone === null || !registered.has(phone)) return { jid, code: 404 };
      if (member) return { jid, code: 409 };
      group.participants.push({ jid, isAdmin: false, isSuperAdmin: false });
      return { jid, code: 200 };
    }
    if (!member) return { jid, code: 404 };
    if (member.isSuperAdmin && action !== 'promote') return { jid, code: 406 };
    if (action === 'remove') group.participants = group.participants.filter((p) => p.jid !== jid);
    else member.isAdmin = action === 'promote';
    return { jid, code: 200 };
  });
}

/** @throws DomainError forbidden when `actor` is not an admin and `change` needs one ({@link adminNeededFor}). */
function checkMayChange(group: StoredGroup, actor: Jid, change: GroupChange, who: string): void {
  if (isAdminIn(group, actor)) return;
  const refusal = adminNeededFor(change, group.isLocked, who);
  if (refusal) throw new DomainError('forbidden', refusal);
}

/** Applies `change` by `actor` to `group`, saves it and emits one event per field, in {@link GroupChange} order. */
async function applyChange(
  account: SandboxAccount,
  group: StoredGroup,
  actor: Jid,
  change: GroupChange,
): Promise<void> {
  const now = account.context.clock();
  const updates: Omit<GroupUpdate, 'timestamp'>[] = [];
  const base = { groupJid: group.jid, actor, participants: [] };
  if (change.name !== undefined) {
    Object.assign(group, { name: change.name, nameSetAt: now, nameSetBy: actor });
    updates.push({ ...base, action: 'subject', name: change.name });
  }
  if (change.topic !== undefined) {
    group.topic = change.topic;
    updates.push({ ...base, action: 'description', topic: change.topic });
  }
  if (change.announce !== undefined) {
    group.isAnnounce = change.announce;
    updates.push({ ...base, action: 'announce', isAnnounce: change.announce });
  }
  if (change.locked !== undefined) {
    group.isLocked = change.locked;
    updates.push({ ...base, action: 'locked', isLocked: change.locked });
  }
  if (change.disappearingTimer !== undefined) {
    group.disappearingTimer = change.disappearingTimer;
    group.isEphemeral = change.disappearingTimer > 0;
    updates.push({ ...base, action: 'ephemeral', disappearingTimer: change.disappearingTimer });
  }
  await saveReported(account, group, updates);
}

/**
 * Saves `group` and reports the participants whose code is 200, each once, as one `action` event by `actor`
 * ({@link saveReported}). A remove whose only participant is the actor is reported as `leave`, as the live engine
 * reads the platform's `<remove>` of the actor itself (src/engines/baileys/group-events.ts).
 */
async function reportParticipants(
  account: SandboxAccount,
  group: StoredGroup,
  actor: Jid,
  action: ParticipantAction,
  outcomes: readonly ParticipantOutcome[],
): Promise<void> {
  const done = [...new Set(outcomes.filter((o) => o.code === 200).map((o) => o.jid))];
  if (done.length === 0) return;
  const reported = action === 'remove' && done.length === 1 && done[0] === actor ? 'leave' : action;
  await saveReported(account, group, [{ groupJid: group.jid, action: reported, actor, participants: done }]);
}

/**
 * The account adds, removes, promotes or demotes `participants` (user JIDs) of group `jid`.
 * @throws DomainError not_found when the account is not in the group; forbidden `you must be a group admin to
 *   <action> participants`; not_logged_in / not_connected.
 */
export function updateParticipants(
  account: SandboxAccount,
  jid: Jid,
  action: ParticipantAction,
  participants: readonly Jid[],
): Promise<ParticipantOutcome[]> {
  return changeSerially(account, () => updateParticipantsInner(account, jid, action, participants));
}

async function updateParticipantsInner(
  account: SandboxAccount,
  jid: Jid,
  action: ParticipantAction,
  participants: readonly Jid[],
): Promise<ParticipantOutcome[]> {
  const me = ownJid(await account.ready());
  const group = await memberGroup(account, me, jid);
  if (!isAdminIn(group, me)) {
    throw new DomainError('forbidden', `you must be a group admin to ${action} participants`);
  }
  const outcomes = await applyParticipants(account, group, action, participants);
  await reportParticipants(account, group, me, action, outcomes);
  return outcomes;
}

/**
 * The account changes the name, topic or settings of group `jid`.
 * @throws DomainError invalid (see {@link checkGroupChange}); not_found; forbidden (see the module rules).
 */
export function updateGroup(account: SandboxAccount, jid: Jid, change: GroupChange): Promise<void> {
  return changeSerially(account, () => updateGroupInner(account, jid, change));
}

async function updateGroupInner(account: SandboxAccount, jid: Jid, change: GroupChange): Promise<void> {
  const me = ownJid(await account.ready());
  checkGroupChange(change);
  const group = await memberGroup(account, me, jid);
  checkMayChange(group, me, change, 'you');
  await applyChange(account, group, me, change);
}

/** The account leaves group `jid` (a `leave` event follows). @throws DomainError not_found. */
export function leaveGroup(account: SandboxAccount, jid: Jid): Promise<void> {
  return changeSerially(account, () => leaveGroupInner(account, jid));
}

async function leaveGroupInner(account: SandboxAccount, jid: Jid): Promise<void> {
  const me = ownJid(await account.ready());
  const group = await memberGroup(account, me, jid);
  group.participants = group.participants.filter((p) => p.jid !== me);
  await saveReported(account, group, [{ groupJid: jid, action: 'leave', actor: me, participants: [me] }]);
}

/**
 * The account joins the group whose current invite code is `code`; a `join` event follows (none when it is
 * already a member). @returns the group's JID. @throws DomainError not_found when no group has this code (never
 * existed, or revoked).
 */
export function joinGroup(account: SandboxAccount, code: string): Promise<Jid> {
  return changeSerially(account, () => joinGroupInner(account, code));
}

async function joinGroupInner(account: SandboxAccount, code: string): Promise<Jid> {
  const me = ownJid(await account.ready());
  const group = (await account.world.groups()).find((g) => g.inviteCode === code);
  if (!group) throw errors.notFound('invite link not found: it may have been revoked');
  if (isMember(group, me)) return group.jid;
  group.participants.push({ jid: me, isAdmin: false, isSuperAdmin: false });
  await saveReported(account, group, [
    { groupJid: group.jid, action: 'join', actor: me, participants: [me] },
  ]);
  return group.jid;
}

/**
 * Revokes the invite code of group `jid` and returns the new one (the old link stops working).
 * @throws DomainError not_found; forbidden `you must be a group admin to revoke the invite link`.
 */
export function revokeGroupInvite(account: SandboxAccount, jid: Jid): Promise<string> {
  return changeSerially(account, () => revokeGroupInviteInner(account, jid));
}

async function revokeGroupInviteInner(account: SandboxAccount, jid: Jid): Promise<string> {
  const me = ownJid(await account.ready());
  const group = await memberGroup(account, me, jid);
  if (!isAdminIn(group, me)) {
    throw new DomainError('forbidden', 'you must be a group admin to revoke the invite link');
  }
  group.inviteCode = inviteCodeFor(account.context.instanceId, `${jid}#${await account.sequence.next()}`);
  await account.world.saveGroup(group);
  return group.inviteCode;
}

/**
 * Sandbox helper (docs/decisions/0004-sandbox.md): simulated member `phone` changes a group the account is in; the
 * `group` events follow as for any change. See {@link SandboxGroupChangeInput}.
 * @throws DomainError invalid when neither an action nor a change is given, or for a bad participant; not_found
 *   when the account is not in the group; not_participant when `phone` is not a member; conflict when `phone`
 *   joins a group it is in; forbidden when `phone` may not make the change.
 */
export function sandboxGroupChange(
  account: SandboxAccount,
  input: SandboxGroupChangeInput,
): Promise<GroupInfo> {
  return changeSerially(account, () => sandboxGroupChangeInner(account, input));
}

async function sandboxGroupChangeInner(
  account: SandboxAccount,
  input: SandboxGroupChangeInput,
): Promise<GroupInfo> {
  const me = ownJid(await account.ready());
  const group = await memberGroup(account, me, input.groupJid);
  const actor = userJid(input.phone);
  const who = `phone ${input.phone}`;
  const { groupJid: _g, phone: _p, action, participants, ...change } = input;
  if (action === 'join') {
    if (isMember(group, actor)) throw errors.conflict(`${who} is already a participant of the group`);
    if (!(await account.world.user(input.phone)).registered) {
      throw new DomainError('not_registered', `${who} is not registered on the platform`);
    }
    group.participants.push({ jid: actor, isAdmin: false, isSuperAdmin: false });
    await saveReported(account, group, [
      { groupJid: group.jid, action: 'join', actor, participants: [actor] },
    ]);
    return groupInfoOf(group);
  }
  if (!isMember(group, actor)) {
    throw new DomainError('not_participant', `${who} is not a participant of the group`);
  }
  if (action === 'leave') {
    group.participants = group.participants.filter((p) => p.jid !== actor);
    await saveReported(account, group, [
      { groupJid: group.jid, action: 'leave', actor, participants: [actor] },
    ]);
    return groupInfoOf(group);
  }
  if (action !== undefined) {
    if (!participants || participants.length === 0) {
      throw errors.badRequest(`participants is required with action ${action}`);
    }
    if (!isAdminIn(group, actor)) {
      throw new DomainError('forbidden', `${who} must be a group admin to ${action} participants`);
    }
    const outcomes = await applyParticipants(account, group, action, participants.map(userJid));
    await reportParticipants(account, group, actor, action, outcomes);
    return groupInfoOf(group);
  }
  if (Object.values(change).every((v) => v === undefined)) {
    throw errors.badRequest(
      'give an action or at least one of name, topic, announce, locked, disappearingTimer',
    );
  }
  checkGroupChange(change);
  checkMayChange(group, actor, change, who);
  await applyChange(account, group, actor, change);
  return groupInfoOf(group);
}
