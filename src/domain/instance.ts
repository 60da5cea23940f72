import type { Environment } from './environment.ts';

/** An instance's id: a lowercase UUID (docs/api.md#conventions). */
export type InstanceId = string;

/**
 * Webhook event types: the four original types, then the ones parley adds beyond the contract (message edits and
 * deletions, group changes, calls, poll votes, session and send status: docs/api.md "Events",
 * docs/decisions/0012-session-and-message-status-events.md).
 */
export type EventType =
  | 'Message'
  | 'ReadReceipt'
  | 'HistorySync'
  | 'ChatPresence'
  | 'MessageUpdate'
  | 'GroupUpdate'
  | 'Call'
  | 'PollVote'
  | 'SessionStatus'
  | 'MessageStatus';

/**
 * Every {@link EventType} in canonical order (subscriptions are kept in this order): the four original types first.
 */
export const EVENT_TYPES: readonly EventType[] = [
  'Message',
  'ReadReceipt',
  'HistorySync',
  'ChatPresence',
  'MessageUpdate',
  'GroupUpdate',
  'Call',
  'PollVote',
  'SessionStatus',
  'MessageStatus',
];

/**
 * The subscription an instance gets when `subscribe` was never given (docs/decisions/0016-session-lifecycle.md): the
 * four event types of docs/api.md#webhook-events. The types added beyond the contract are delivered only to
 * subscriptions that name them, so an existing subscription keeps its meaning.
 */
export const DEFAULT_SUBSCRIPTION: readonly EventType[] = [
  'Message',
  'ReadReceipt',
  'HistorySync',
  'ChatPresence',
];

/**
 * One linked number (docs/decisions/0003-scopes-and-keys.md). `subscribe` is null until the first connect (then
 * docs/decisions/0016-session-lifecycle.md defaults).
 */
export interface Instance {
  id: InstanceId;
  orgId: string;
  env: Environment;
  name: string;
  phone: string | null;
  jid: string | null;
  pushName: string | null;
  webhookUrl: string | null;
  subscribe: EventType[] | null;
  /** Sealed HMAC key (docs/decisions/0020-security-promises.md); open with the SecretBox. */
  hmacKeySealed: string | null;
  desiredState: 'connected' | 'disconnected';
  /** RFC 3339 time of the latest successful connect, or null (docs/decisions/0002-instance-resolution.md). */
  lastConnectedAt: string | null;
  /** RFC 3339. */
  createdAt: string;
}
