/**
 * The `w:g2` group queries as Baileys 7 sends them (lib/Socket/groups.js) and the answers it parses
 * (extractGroupMetadata, groupFetchAllParticipating, groupInviteCode):
 * - `set` to `@g.us` `<create subject key><participant jid/>…</create>` → `<group …>` of the new group;
 * - `get` to `@g.us` `<participating>` → `<groups><group …/>…</groups>` (every group of the account);
 * - `get` to the group `<query request="interactive"/>` → `<group …>`;
 * - `get` to the group `<invite/>` → `<invite code/>` (admins only: others get `401 not-authorized`, which
 *   parley reports as "must be a group admin"); `set` `<invite/>` revokes it and answers the new code.
 * - `set` to the group `<add|remove|promote|demote>`, `<subject>`, `<description>`, `<announcement>` …, and to
 *   `@g.us` `<leave>` and `<invite code>` (join): server/group-admin-iq.ts.
 * A group the account is not in answers `401 not-authorized`, an unknown one `404 item-not-found` (parley
 * reports both as "group not found"). A new group is announced to the other member devices (messaging/group-notify.ts).
 * Groups are LID-addressed: `<group addressing_mode="lid" creator=<lid> creator_pn=<phone>
 * s_o s_o_pn …><participant jid=<lid> phone_number=<phone> type?/>…`.
 */
import { type BinaryNode, getBinaryNodeChildren } from 'baileys';
import { notifyGroupCreated } from '../messaging/group-notify.ts';
import type { Accounts, User } from '../model/accounts.ts';
import { groupsOf, isAdmin, newInviteCode } from '../model/groups.ts';
import { adminIq, joinByInvite, leaveIq } from './group-admin-iq.ts';
import { groupNode } from './group-node.ts';
import type { IqAnswer, IqContext } from './iq.ts';

const notAuthorized: IqAnswer = { error: { code: 401, text: 'not-authorized' } };
const notFound: IqAnswer = { error: { code: 404, text: 'item-not-found' } };
const badRequest = (text: string): IqAnswer => ({ error: { code: 400, text } });

function firstChild(iq: BinaryNode): BinaryNode | undefined {
  return Array.isArray(iq.content) ? iq.content[0] : undefined;
}

/** The users named by `<participant jid>` (phone or LID JIDs); unknown or unregistered numbers are left out. */
function participantsOf(create: BinaryNode, accounts: Accounts): User[] {
  return getBinaryNodeChildren(create, 'participant')
    .map((p) => accounts.resolve(p.attrs.jid ?? '')?.user)
    .filter((u): u is User => u?.registered === true);
}

/** Answers one `w:g2` iq from a device of `ctx.user`. */
export function groupIq(iq: BinaryNode, ctx: IqContext): IqAnswer {
  const groups = groupsOf(ctx.accounts);
  const first = firstChild(iq);
  const to = iq.attrs.to ?? '';
  if (to === '@g.us') {
    if (iq.attrs.type === 'set' && first?.tag === 'create') {
      const subject = first.attrs.subject ?? '';
      if (subject.trim() === '') return badRequest('subject is required');
      const group = groups.create(ctx.user, subject, participantsOf(first, ctx.accounts));
      notifyGroupCreated(group, ctx.device);
      return { content: [groupNode(group)] };
    }
    if (iq.attrs.type === 'get' && first?.tag === 'participating') {
      return { content: [{ tag: 'groups', attrs: {}, content: groups.of(ctx.user).map(groupNode) }] };
    }
    if (iq.attrs.type === 'set' && first?.tag === 'leave') return leaveIq(first, ctx);
    if (iq.attrs.type === 'set' && first?.tag === 'invite' && first.attrs.code)
      return joinByInvite(first, ctx);
    return { error: { code: 501, text: 'feature-not-implemented' } };
  }
  const group = groups.get(to);
  if (!group) return notFound;
  if (!group.members.has(ctx.user.phone)) return notAuthorized;
  switch (first?.tag) {
    case 'query':
      return { content: [groupNode(group)] };
    case 'invite':
      if (!isAdmin(group, ctx.user)) return notAuthorized;
      if (iq.attrs.type === 'set') group.inviteCode = newInviteCode();
      return { content: [{ tag: 'invite', attrs: { code: group.inviteCode } }] };
    default:
      if (iq.attrs.type === 'set' && first) return adminIq(group, first, ctx);
      return { error: { code: 501, text: 'feature-not-implemented' } };
  }
}
