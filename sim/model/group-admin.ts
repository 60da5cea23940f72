/**
 * Group administration on the simulated platform: the rules, the per-participant codes and the `w:gp2`
 * notification children each change produces. Used by the `w:g2` iq handler (server/groups.ts, for linked
 * devices) and by the control API (control/group-admin.ts, for simulated members), so both change a group alike.
 *
 * Rules modelled (as the platform applies them): only admins add, remove, promote, demote and change the
 * announce / locked settings; the subject, description and disappearing timer may be changed by any member
 * unless the group is locked. Per-participant codes (the `error` attribute Baileys' groupParticipantsUpdate
 * reads; none means 200): 404 not registered (add) or not a member (others), 409 already a member (add), 406
 * the creator may not be removed or demoted (a promote leaves it the creator). Privacy-restricted adds (403 with
 * an invite) and recently-left users (408) are not modelled.
 */
import type { BinaryNode } from 'baileys';
import { lidJid, shownPhoneAttr, type User } from './accounts.ts';
import { type Group, isAdmin, MAX_SUBJECT } from './groups.ts';

/** Participant actions (the `w:g2` child tag). */
export type MemberAction = 'add' | 'remove' | 'promote' | 'demote';

/** Disappearing-message timers the platform accepts, seconds. */
export const EPHEMERAL_TIMERS = [86_400, 604_800, 7_776_000] as const;

/** Longest description the platform accepts, characters. */
export const MAX_DESCRIPTION = 2048;

/** A refusal: the iq error code and text (the control API answers the same code with the text). */
export class GroupRefusal extends Error {
  constructor(
    readonly code: number,
    readonly text: string,
  ) {
    super(text);
  }
}

/** One target of a participant action: the JID as asked, and the user it names (undefined: unknown). */
export interface Target {
  jid: string;
  user: User | undefined;
}

/** The outcome of a participant action: a code per target, and the notification child for those done. */
export interface ParticipantsOutcome {
  codes: { jid: string; code: number }[];
  /** `<add|remove|promote|demote>` naming the users changed; undefined when none was. */
  notification: BinaryNode | undefined;
  /** Users no longer members (they are told too). */
  removed: User[];
}

/** The `<participant>` of a user in a notification: LID-addressed, phone beside it (none when hidden). */
export function participantRef(user: User): BinaryNode {
  return { tag: 'participant', attrs: { jid: lidJid(user.lid), ...shownPhoneAttr('phone_number', user) } };
}

/**
 * `actor` applies `action` to `targets`. @throws GroupRefusal 401 `not-authorized` when the actor is not an
 * admin.
 */
export function changeParticipants(
  group: Group,
  actor: User,
  action: MemberAction,
  targets: readonly Target[],
): ParticipantsOutcome {
  if (!isAdmin(group, actor)) throw new GroupRefusal(401, 'not-authorized');
  const codes: { jid: string; code: number }[] = [];
  const done: User[] = [];
  for (const { jid, user } of targets) {
    const member = user ? group.members.get(user.phone) : undefined;
    let code = 200;
    if (action === 'add') {
      if (!user?.registered) code = 404;
      else if (member) code = 409;
      else group.members.set(user.phone, { user, role: 'member' });
    } else if (!member || !user) code = 404;
    else if (member.role === 'superadmin' && action !== 'promote') code = 406;
    else if (action === 'remove') group.members.delete(user.phone);
    else if (action === 'promote') {
      // The creator stays the creator: a promote leaves it superadmin (it used to make it a plain admin, which the
      // next demote then took for an admin's and answered 200 instead of 406).
      if (member.role !== 'superadmin') member.role = 'admin';
    } else member.role = 'member';
    codes.push({ jid, code });
    if (code === 200 && user) done.push(user);
  }
  const notification =
    done.length > 0 ? { tag: action, attrs: {}, content: done.map(participantRef) } : undefined;
  return { codes, notification, removed: action === 'remove' ? done : [] };
}

/** `user` joins by invite (or is let in by the control API): the `<add reason="invite">` child. */
export function joinGroup(group: Group, user: User): BinaryNode {
  if (group.members.has(user.phone)) throw new GroupRefusal(409, 'conflict');
  group.members.set(user.phone, { user, role: 'member' });
  return { tag: 'add', attrs: { reason: 'invite' }, content: [participantRef(user)] };
}

/** `user` leaves: the `<remove>` child naming the user itself (Baileys reports it as a leave). */
export function leaveGroup(group: Group, user: User): BinaryNode {
  if (!group.members.delete(user.phone)) throw new GroupRefusal(404, 'item-not-found');
  return { tag: 'remove', attrs: {}, content: [participantRef(user)] };
}

/** A change of the group's info or settings (the fields of the control API; iq children map onto it). */
export interface SettingsChange {
  subject?: string;
  /** '' removes the description. */
  description?: string;
  announce?: boolean;
  locked?: boolean;
  /** Seconds, 0 off. */
  ephemeral?: number;
}

function checkMay(group: Group, actor: User, change: SettingsChange): void {
  if (isAdmin(group, actor)) return;
  if (change.announce !== undefined || change.locked !== undefined || group.locked) {
    throw new GroupRefusal(401, 'not-authorized');
  }
}

/**
 * `actor` changes the group's info and settings, in the order subject, description, announce, locked,
 * ephemeral; returns one notification child per field. @throws GroupRefusal 400 for a bad value, 401 when the
 * actor may not make the change.
 */
export function changeSettings(
  group: Group,
  actor: User,
  change: SettingsChange,
  now = Date.now(),
): BinaryNode[] {
  const { subject, description, ephemeral } = change;
  if (subject !== undefined && (subject.trim() === '' || [...subject].length > MAX_SUBJECT)) {
    throw new GroupRefusal(400, 'bad-request');
  }
  if (description !== undefined && [...description].length > MAX_DESCRIPTION) {
    throw new GroupRefusal(400, 'bad-request');
  }
  if (
    ephemeral !== undefined &&
    ephemeral !== 0 &&
    !(EPHEMERAL_TIMERS as readonly number[]).includes(ephemeral)
  ) {
    throw new GroupRefusal(400, 'bad-request');
  }
  checkMay(group, actor, change);
  const seconds = Math.floor(now / 1000);
  const nodes: BinaryNode[] = [];
  if (subject !== undefined) {
    Object.assign(group, { subject, subjectOwner: actor, subjectTime: seconds });
    const attrs = {
      subject,
      s_o: lidJid(actor.lid),
      ...shownPhoneAttr('s_o_pn', actor),
      s_t: String(seconds),
    };
    nodes.push({ tag: 'subject', attrs });
  }
  if (description !== undefined) {
    const id = `${seconds.toString(16).toUpperCase()}${Math.random().toString(16).slice(2, 10).toUpperCase()}`;
    Object.assign(group, {
      description,
      descriptionId: id,
      descriptionOwner: actor,
      descriptionTime: seconds,
    });
    nodes.push(
      description === ''
        ? { tag: 'description', attrs: { id, delete: 'true' } }
        : {
            tag: 'description',
            attrs: { id },
            content: [{ tag: 'body', attrs: {}, content: Buffer.from(description, 'utf8') }],
          },
    );
  }
  if (change.announce !== undefined) {
    group.announce = change.announce;
    nodes.push({ tag: change.announce ? 'announcement' : 'not_announcement', attrs: {} });
  }
  if (change.locked !== undefined) {
    group.locked = change.locked;
    nodes.push({ tag: change.locked ? 'locked' : 'unlocked', attrs: {} });
  }
  if (ephemeral !== undefined) {
    group.ephemeral = ephemeral;
    nodes.push(
      ephemeral > 0
        ? { tag: 'ephemeral', attrs: { expiration: String(ephemeral) } }
        : { tag: 'not_ephemeral', attrs: {} },
    );
  }
  return nodes;
}

/**
 * The {@link SettingsChange} a `w:g2` set iq child asks for (Baileys groupUpdateSubject, groupUpdateDescription,
 * groupSettingUpdate, groupToggleEphemeral); undefined for any other child.
 */
export function settingsChangeOf(child: BinaryNode): SettingsChange | undefined {
  const text = (content: BinaryNode['content']) =>
    content instanceof Uint8Array
      ? Buffer.from(content).toString('utf8')
      : typeof content === 'string'
        ? content
        : '';
  switch (child.tag) {
    case 'subject':
      return { subject: text(child.content) };
    case 'description': {
      if (child.attrs.delete === 'true') return { description: '' };
      const body = Array.isArray(child.content) ? child.content.find((c) => c.tag === 'body') : undefined;
      return { description: text(body?.content) };
    }
    case 'announcement':
    case 'not_announcement':
      return { announce: child.tag === 'announcement' };
    case 'locked':
    case 'unlocked':
      return { locked: child.tag === 'locked' };
    case 'ephemeral':
      return { ephemeral: Number(child.attrs.expiration ?? 0) };
    case 'not_ephemeral':
      return { ephemeral: 0 };
    default:
      return undefined;
  }
}
