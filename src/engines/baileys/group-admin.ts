import type { GroupMetadata } from 'baileys';
import { DomainError } from '../../domain/errors.ts';
import {
  adminNeededFor,
  type GroupChange,
  type ParticipantAction,
  type ParticipantOutcome,
} from '../../domain/groups.ts';
import type { GroupInfo, Jid } from '../../domain/messages.ts';
import { mapPlatformErrors } from './errors.ts';
import { isAdminOf, keepGroup, toGroupInfo } from './groups.ts';
import type { OperationDeps } from './operations.ts';
import type { SocketLike } from './socket.ts';

/**
 * The account's groups on the live platform, through Baileys (lib/Socket/groups.js): reading them
 * (groupFetchAllParticipating, groupMetadata), creating one (groupCreate), its invite code (groupInviteCode) and
 * administration (groupParticipantsUpdate, groupUpdateSubject, groupUpdateDescription, groupSettingUpdate,
 * groupToggleEphemeral, groupLeave, groupAcceptInvite, groupRevokeInvite). Admin rights are checked first on
 * freshly fetched metadata (a cached copy may predate a promotion) so a non-admin gets a clear 403; the platform's
 * own 401/403 maps to the same message.
 * The metadata cache entry is dropped after every change (the `w:gp2` notification refreshes it too). Metadata
 * fetched is kept in the cache and teaches the resolver its LID pairs (groups.ts `keepGroup`).
 */

const NOT_FOUND = 'group not found';

/** Message of the 403 for an invite link asked by a non-admin (docs/api.md#errors). */
export const NOT_ADMIN = 'caller must be a group admin to get the invite link';

async function freshMetadata(sock: SocketLike, deps: OperationDeps, jid: Jid): Promise<GroupMetadata> {
  const meta = await mapPlatformErrors(() => sock.groupMetadata(jid), {
    notFound: NOT_FOUND,
    now: deps.context.clock(),
  });
  keepGroup(meta, deps.groups, deps.mapping.resolver);
  return meta;
}

async function requireAdmin(sock: SocketLike, deps: OperationDeps, jid: Jid, refusal: string): Promise<void> {
  const meta = await freshMetadata(sock, deps, jid);
  if (!isAdminOf(meta, deps.mapping.me())) throw new DomainError('forbidden', refusal);
}

/** The user part of a JID (`5511…@s.whatsapp.net`, `…:3@…` → `5511…`). */
const userOf = (jid: string): string => jid.split('@')[0]?.split(':')[0] ?? '';

/**
 * Adds, removes, promotes or demotes `participants` (phone JIDs): one outcome per participant in input order,
 * with the platform's code (the `error` attribute of its `<participant>`, 200 when absent). A participant the
 * platform's answer leaves out gets code 0 (`refused`). Answers naming a LID are matched through its
 * `phone_number` attribute or the LID mapping.
 * @throws DomainError not_found; forbidden `you must be a group admin to <action> participants`.
 */
export async function updateParticipants(
  sock: SocketLike,
  deps: OperationDeps,
  jid: Jid,
  action: ParticipantAction,
  participants: readonly Jid[],
): Promise<ParticipantOutcome[]> {
  const refusal = `you must be a group admin to ${action} participants`;
  await requireAdmin(sock, deps, jid, refusal);
  const answers = await mapPlatformErrors(
    () => sock.groupParticipantsUpdate(jid, [...participants], action),
    { forbidden: refusal, notFound: NOT_FOUND, now: deps.context.clock() },
  );
  deps.groups.del(jid);
  const codes = new Map<string, number>();
  for (const answer of answers) {
    if (!answer.jid) continue;
    const phone = answer.content?.attrs.phone_number;
    const resolved = await deps.mapping.resolver.resolve(answer.jid, phone);
    codes.set(userOf(resolved.jid), Number(answer.status) || 0);
  }
  return participants.map((p) => ({ jid: p, code: codes.get(userOf(p)) ?? 0 }));
}

/**
 * Changes the name, topic, announce, locked and disappearing-timer settings, in that order, one platform query
 * each. @throws DomainError not_found; forbidden per {@link adminNeededFor}.
 */
export async function updateGroup(
  sock: SocketLike,
  deps: OperationDeps,
  jid: Jid,
  change: GroupChange,
): Promise<void> {
  const meta = await freshMetadata(sock, deps, jid);
  const refusal = adminNeededFor(change, Boolean(meta.restrict), 'you');
  if (refusal && !isAdminOf(meta, deps.mapping.me())) throw new DomainError('forbidden', refusal);
  const context = {
    forbidden: refusal ?? 'you must be a group admin to make this change',
    notFound: NOT_FOUND,
    now: deps.context.clock(),
  };
  const run = (operation: () => Promise<unknown>) => mapPlatformErrors(operation, context);
  try {
    if (change.name !== undefined) await run(() => sock.groupUpdateSubject(jid, change.name ?? ''));
    if (change.topic !== undefined) {
      await run(() => sock.groupUpdateDescription(jid, change.topic === '' ? undefined : change.topic));
    }
    if (change.announce !== undefined) {
      await run(() => sock.groupSettingUpdate(jid, change.announce ? 'announcement' : 'not_announcement'));
    }
    if (change.locked !== undefined) {
      await run(() => sock.groupSettingUpdate(jid, change.locked ? 'locked' : 'unlocked'));
    }
    if (change.disappearingTimer !== undefined) {
      await run(() => sock.groupToggleEphemeral(jid, change.disappearingTimer ?? 0));
    }
  } finally {
    deps.groups.del(jid);
  }
}

/** The account leaves the group. @throws DomainError not_found when it is not in it. */
export async function leaveGroup(sock: SocketLike, deps: OperationDeps, jid: Jid): Promise<void> {
  await freshMetadata(sock, deps, jid);
  await mapPlatformErrors(() => sock.groupLeave(jid), { notFound: NOT_FOUND, now: deps.context.clock() });
  deps.groups.del(jid);
}

/**
 * Joins a group by invite code; returns its JID.
 * @throws DomainError not_found `invite link not found: it may have been revoked` for an unknown or revoked code.
 */
export async function joinGroup(sock: SocketLike, deps: OperationDeps, code: string): Promise<Jid> {
  const jid = await mapPlatformErrors(() => sock.groupAcceptInvite(code), {
    notFound: 'invite link not found: it may have been revoked',
    now: deps.context.clock(),
  });
  if (!jid) throw new DomainError('platform_refused', 'the platform returned no group for the invite link');
  return jid;
}

/**
 * Revokes the group's invite code and returns the new one.
 * @throws DomainError not_found; forbidden `you must be a group admin to revoke the invite link`.
 */
export async function revokeGroupInvite(sock: SocketLike, deps: OperationDeps, jid: Jid): Promise<string> {
  const refusal = 'you must be a group admin to revoke the invite link';
  return adminInviteCode(sock, deps, jid, refusal, () => sock.groupRevokeInvite(jid));
}

/**
 * The invite code `fetch` gets from the platform for group `jid`, once the account is checked to be an admin of it
 * on fresh metadata; `refusal` is the message of the 403 (the platform's own 401/403 maps to it too).
 * @throws DomainError forbidden `refusal`; not_found when not a member; platform_refused when no code came back.
 */
async function adminInviteCode(
  sock: SocketLike,
  deps: OperationDeps,
  jid: Jid,
  refusal: string,
  fetch: () => Promise<string | undefined>,
): Promise<string> {
  await requireAdmin(sock, deps, jid, refusal);
  const code = await mapPlatformErrors(fetch, {
    forbidden: refusal,
    notFound: NOT_FOUND,
    now: deps.context.clock(),
  });
  if (!code) throw new DomainError('platform_refused', 'the platform returned no invite code');
  return code;
}

async function remember(meta: GroupMetadata, deps: OperationDeps): Promise<GroupInfo> {
  keepGroup(meta, deps.groups, deps.mapping.resolver);
  return toGroupInfo(meta, deps.mapping);
}

/** Creates a group (docs/api.md#groups); the account is listed as admin and super admin. */
export async function createGroup(
  sock: SocketLike,
  deps: OperationDeps,
  name: string,
  participants: readonly Jid[],
): Promise<GroupInfo> {
  const meta = await mapPlatformErrors(() => sock.groupCreate(name, [...participants]), {
    now: deps.context.clock(),
  });
  const info = await remember(meta, deps);
  const me = deps.mapping.me();
  if (me.phoneJid) {
    const mine = info.participants.find((p) => p.jid === me.phoneJid);
    if (mine) {
      mine.isAdmin = true;
      mine.isSuperAdmin = true;
    } else info.participants.unshift({ jid: me.phoneJid, isAdmin: true, isSuperAdmin: true });
    if (!info.ownerJid) info.ownerJid = me.phoneJid;
  }
  return info;
}

/** Every group the account belongs to (`groupFetchAllParticipating`), ordered by JID. */
export async function listGroups(sock: SocketLike, deps: OperationDeps): Promise<GroupInfo[]> {
  const all = await mapPlatformErrors(() => sock.groupFetchAllParticipating(), { now: deps.context.clock() });
  const out: GroupInfo[] = [];
  for (const meta of Object.values(all)) out.push(await remember(meta, deps));
  return out.sort((a, b) => a.jid.localeCompare(b.jid));
}

/** One group, fetched fresh (docs/api.md#groups). @throws not_found when the account is not in it. */
export async function groupInfo(sock: SocketLike, deps: OperationDeps, jid: Jid): Promise<GroupInfo> {
  return toGroupInfo(await freshMetadata(sock, deps, jid), deps.mapping);
}

/**
 * The invite code of a group (docs/api.md#groups). @throws forbidden {@link NOT_ADMIN} when the account is not an
 * admin (checked on freshly fetched metadata — a cached copy may predate a promotion — and mapped from the
 * platform's 401/403), not_found when not a member.
 */
export async function groupInviteCode(sock: SocketLike, deps: OperationDeps, jid: Jid): Promise<string> {
  return adminInviteCode(sock, deps, jid, NOT_ADMIN, () => sock.groupInviteCode(jid));
}
