/**
 * The `w:g2` administration iqs as Baileys 7 sends them (lib/Socket/groups.js) and the answers it reads:
 * - `set` to the group `<add|remove|promote|demote><participant jid/>…</…>` (groupParticipantsUpdate) →
 *   `<add|…><participant jid error?/>…</…>`, one per asked JID (no `error`: done);
 * - `set` to the group `<subject>text</subject>`, `<description id|delete prev?><body/></description>`,
 *   `<announcement/>`, `<not_announcement/>`, `<locked/>`, `<unlocked/>`, `<ephemeral expiration/>`,
 *   `<not_ephemeral/>` (groupUpdateSubject, groupUpdateDescription, groupSettingUpdate, groupToggleEphemeral) →
 *   an empty result;
 * - `set` to `@g.us` `<leave><group id/></leave>` (groupLeave) → an empty result;
 * - `set` to `@g.us` `<invite code/>` (groupAcceptInvite) → `<group jid/>`.
 * Each change is then notified to the members' companions (`w:gp2`, messaging/group-notify.ts), the asking
 * device included. Refusals: `401 not-authorized` (not an admin where one is needed), `404 item-not-found`
 * (unknown group or code), `400 bad-request` (a bad value).
 */
import { type BinaryNode, getBinaryNodeChildren } from 'baileys';
import { notifyGroupChange } from '../messaging/group-notify.ts';
import {
  changeParticipants,
  changeSettings,
  GroupRefusal,
  joinGroup,
  leaveGroup,
  type MemberAction,
  settingsChangeOf,
} from '../model/group-admin.ts';
import { type Group, groupsOf } from '../model/groups.ts';
import type { IqAnswer, IqContext } from './iq.ts';

const refused = (error: unknown): IqAnswer => {
  if (error instanceof GroupRefusal) return { error: { code: error.code, text: error.text } };
  throw error;
};

const MEMBER_ACTIONS = new Set(['add', 'remove', 'promote', 'demote']);

/** A `set` iq to a group the asking user is a member of: participant actions and settings. */
export function adminIq(group: Group, child: BinaryNode, ctx: IqContext): IqAnswer {
  try {
    if (MEMBER_ACTIONS.has(child.tag)) {
      const action = child.tag as MemberAction;
      const targets = getBinaryNodeChildren(child, 'participant').map((p) => {
        const jid = p.attrs.jid ?? '';
        return { jid, user: ctx.accounts.resolve(jid)?.user };
      });
      const outcome = changeParticipants(group, ctx.user, action, targets);
      if (outcome.notification) notifyGroupChange(group, ctx.user, [outcome.notification], outcome.removed);
      const answers: BinaryNode[] = outcome.codes.map(({ jid, code }) => {
        const attrs: Record<string, string> = { jid };
        if (code !== 200) attrs.error = String(code);
        return { tag: 'participant', attrs };
      });
      return { content: [{ tag: action, attrs: {}, content: answers }] };
    }
    const change = settingsChangeOf(child);
    if (!change) return { error: { code: 501, text: 'feature-not-implemented' } };
    for (const node of changeSettings(group, ctx.user, change)) notifyGroupChange(group, ctx.user, [node]);
    return {};
  } catch (error) {
    return refused(error);
  }
}

/** `<leave><group id/>…</leave>` to `@g.us`: the asking user leaves each group named (it must be a member). */
export function leaveIq(child: BinaryNode, ctx: IqContext): IqAnswer {
  const groups = groupsOf(ctx.accounts);
  try {
    for (const node of getBinaryNodeChildren(child, 'group')) {
      const id = node.attrs.id ?? '';
      const group = groups.get(id.includes('@') ? id : `${id}@g.us`);
      if (!group) return { error: { code: 404, text: 'item-not-found' } };
      const removal = leaveGroup(group, ctx.user);
      notifyGroupChange(group, ctx.user, [removal], [ctx.user]);
    }
    return {};
  } catch (error) {
    return refused(error);
  }
}

/**
 * `<invite code/>` set to `@g.us`: the asking user joins the group whose current code it is (`404
 * item-not-found` for an unknown or revoked code); a member already in it gets the group's JID back too.
 */
export function joinByInvite(child: BinaryNode, ctx: IqContext): IqAnswer {
  const group = groupsOf(ctx.accounts).byInviteCode(child.attrs.code ?? '');
  if (!group) return { error: { code: 404, text: 'item-not-found' } };
  if (!group.members.has(ctx.user.phone)) notifyGroupChange(group, ctx.user, [joinGroup(group, ctx.user)]);
  return { content: [{ tag: 'group', attrs: { jid: group.jid } }] };
}
