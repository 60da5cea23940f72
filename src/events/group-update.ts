import type { GroupUpdate, GroupUpdateAction } from '../domain/messages.ts';

/**
 * `event` of a `GroupUpdate` webhook: one change of a group made by anyone (the account included). `actor` and
 * `participants` are phone JIDs when they can be resolved; `timestamp` is RFC 3339 UTC
 * (docs/decisions/0001-envelope-and-error-codes.md). Only the field of the action is present: `name` (subject),
 * `topic` (description), `isAnnounce` (announce), `isLocked` (locked), `disappearingTimer` in seconds (ephemeral).
 */
export interface GroupUpdateEvent {
  groupJid: string;
  action: GroupUpdateAction;
  actor: string | null;
  participants: string[];
  timestamp: string;
  name?: string;
  topic?: string;
  isAnnounce?: boolean;
  isLocked?: boolean;
  disappearingTimer?: number;
}

/** The `event` object of a `GroupUpdate` webhook for `update` (key order fixed, so bodies are stable). */
export function groupUpdateEvent(update: GroupUpdate): GroupUpdateEvent {
  const event: GroupUpdateEvent = {
    groupJid: update.groupJid,
    action: update.action,
    actor: update.actor,
    participants: [...update.participants],
    timestamp: new Date(update.timestamp).toISOString(),
  };
  if (update.name !== undefined) event.name = update.name;
  if (update.topic !== undefined) event.topic = update.topic;
  if (update.isAnnounce !== undefined) event.isAnnounce = update.isAnnounce;
  if (update.isLocked !== undefined) event.isLocked = update.isLocked;
  if (update.disappearingTimer !== undefined) event.disappearingTimer = update.disappearingTimer;
  return event;
}
