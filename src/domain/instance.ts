import type { Environment } from './environment.ts';

/** An instance's id: a lowercase UUID (SPEC Identifiers). */
export type InstanceId = string;

/** Webhook event types (SPEC Events). */
export type EventType = 'Message' | 'ReadReceipt' | 'HistorySync' | 'ChatPresence';

/** Every {@link EventType} in the canonical order of SPEC Events (subscriptions are kept in this order). */
export const EVENT_TYPES: readonly EventType[] = ['Message', 'ReadReceipt', 'HistorySync', 'ChatPresence'];

/** One linked number (DESIGN D3). `subscribe` is null until the first connect (then DESIGN D7 defaults). */
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
  /** Sealed HMAC key (DESIGN D11); open with the SecretBox. */
  hmacKeySealed: string | null;
  desiredState: 'connected' | 'disconnected';
  /** RFC 3339 time of the latest successful connect, or null (DESIGN D4). */
  lastConnectedAt: string | null;
  /** RFC 3339. */
  createdAt: string;
}
