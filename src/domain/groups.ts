/**
 * Group administration in the domain's words: the participant actions, the platform's per-participant answer
 * codes and what parley calls each, and the changes of a group's settings. The codes are the `error` attribute
 * of each `<participant>` in the platform's answer to a `w:g2` add/remove/promote/demote (Baileys
 * Socket/groups.js groupParticipantsUpdate: no attribute means 200).
 */
import { errors } from './errors.ts';
import type { Jid } from './messages.ts';

/** What a participants call does (the `w:g2` child tag). */
export type ParticipantAction = 'add' | 'remove' | 'promote' | 'demote';

/** The platform's answer for one participant of a participants call. */
export interface ParticipantOutcome {
  /** The participant's user JID (phone JID). */
  jid: Jid;
  /** The platform's code: 200 done, otherwise the refusal (see {@link participantStatus}). */
  code: number;
}

/** Statuses a participants call reports per participant. */
export type ParticipantStatus =
  | 'added'
  | 'removed'
  | 'promoted'
  | 'demoted'
  | 'invite-required'
  | 'not-registered'
  | 'not-in-group'
  | 'already-in-group'
  | 'recently-left'
  | 'not-allowed'
  | 'group-full'
  | 'refused';

const DONE: Record<ParticipantAction, ParticipantStatus> = {
  add: 'added',
  remove: 'removed',
  promote: 'promoted',
  demote: 'demoted',
};

/**
 * parley's name for the platform's per-participant `code` of `action`: 200 done (`added`, `removed`,
 * `promoted`, `demoted`); 403 on add: the user's privacy settings allow only an invitation (`invite-required`);
 * 404: on add the number is not on the platform (`not-registered`), otherwise it is not a member
 * (`not-in-group`); 408 on add: the user left recently and may not be added back yet (`recently-left`); 409
 * on add: already a member (`already-in-group`); 406: the group creator may not be removed or demoted
 * (`not-allowed`); 500 on add: the group is full (`group-full`); any other code is `refused`.
 */
export function participantStatus(action: ParticipantAction, code: number): ParticipantStatus {
  if (code === 200) return DONE[action];
  if (code === 404) return action === 'add' ? 'not-registered' : 'not-in-group';
  if (code === 406) return 'not-allowed';
  if (action === 'add') {
    if (code === 403) return 'invite-required';
    if (code === 408) return 'recently-left';
    if (code === 409) return 'already-in-group';
    if (code === 500) return 'group-full';
  }
  return 'refused';
}

/** Disappearing-message timers the platform offers, seconds: off, 24 hours, 7 days, 90 days. */
export const DISAPPEARING_TIMERS = [0, 86_400, 604_800, 7_776_000] as const;

/** Longest group description the platform accepts, characters. */
export const MAX_GROUP_TOPIC = 2048;

/**
 * A change of a group's info and settings; every field optional, applied in this order: `name` (the subject),
 * `topic` (the description, '' removes it), `announce` (only admins send), `locked` (only admins edit the info),
 * `disappearingTimer` (seconds, one of {@link DISAPPEARING_TIMERS}).
 */
export interface GroupChange {
  name?: string;
  topic?: string;
  announce?: boolean;
  locked?: boolean;
  disappearingTimer?: number;
}

/**
 * The invite code of an invite link (`https://chat.whatsapp.com/CODE`, any `https://…/CODE`, or the bare code):
 * 10 to 32 letters and digits. Null when `link` is neither.
 */
export function inviteCodeOf(link: string): string | null {
  const trimmed = link.trim();
  const match = /^(?:https:\/\/[^/\s]+\/(?:invite\/)?)?([A-Za-z0-9]{10,32})\/?$/.exec(trimmed);
  return match?.[1] ?? null;
}

/**
 * The platform's rule on who may make `change`: the announce and locked settings need an admin; the name, topic
 * and disappearing timer need one only while the group is locked. Returns the 403 message for a non-admin
 * (`who` is `you` or e.g. `phone 5511…`), or null when a plain member may make the change.
 */
export function adminNeededFor(change: GroupChange, isLocked: boolean, who: string): string | null {
  const need = who === 'you' ? 'you must be' : `${who} must be`;
  if (change.announce !== undefined || change.locked !== undefined) {
    return `${need} a group admin to change the group settings`;
  }
  if (isLocked) return `${need} a group admin to edit the info of this group: only admins may edit it`;
  return null;
}

/** Longest group name the platform accepts, characters (docs/api.md#groups). */
export const MAX_GROUP_NAME_LENGTH = 25;

/**
 * Checks `change` against the platform's limits.
 * @throws DomainError invalid naming the field: empty or over 25-character name, topic over 2048 characters,
 *   a timer other than 0, 86400, 604800 or 7776000 seconds.
 */
export function checkGroupChange(change: GroupChange): void {
  if (change.name !== undefined) {
    if (change.name.trim() === '') throw errors.badRequest('name must not be blank');
    if ([...change.name].length > MAX_GROUP_NAME_LENGTH) {
      throw errors.badRequest(`name must be at most ${MAX_GROUP_NAME_LENGTH} characters`);
    }
  }
  if (change.topic !== undefined && [...change.topic].length > MAX_GROUP_TOPIC) {
    throw errors.badRequest(`topic must be at most ${MAX_GROUP_TOPIC} characters`);
  }
  const timer = change.disappearingTimer;
  if (timer !== undefined && !(DISAPPEARING_TIMERS as readonly number[]).includes(timer)) {
    throw errors.badRequest(`disappearingTimer must be one of ${DISAPPEARING_TIMERS.join(', ')} (seconds)`);
  }
}
