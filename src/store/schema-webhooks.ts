import type { Generated } from 'kysely';

/**
 * The webhook tables' shapes (the outbox, its deliveries and their attempts, the extra endpoints;
 * docs/decisions/0005-outbox-and-delivery.md), part of `Database` in src/store/schema.ts. Times are epoch
 * milliseconds, as everywhere in the store (docs/decisions/0027-times-as-epoch-ms.md).
 */

/**
 * Per-instance webhook state (migration 0003, docs/decisions/0005-outbox-and-delivery.md): last event `sequence`, and
 * a 410 Gone disabling.
 */
export interface WebhookStateTable {
  instance_id: string;
  /** The last `sequence` handed out to an event of this instance (0 before the first). */
  last_sequence: number;
  /** When a 410 Gone disabled the webhook (epoch ms); null while enabled. `POST /v1/webhook` re-enables. */
  disabled_at: number | null;
  disabled_reason: string | null;
}

/**
 * A normalised webhook event (docs/decisions/0018-webhook-events-and-payloads.md); `payload` is the exact body text
 * that is signed and sent.
 */
export interface WebhookEventsTable {
  /** UUID; sent as `webhook-id`, the same on every retry. */
  id: string;
  instance_id: string;
  sequence: number;
  /** An `EventType` (src/domain/instance.ts), e.g. `Message` or `SessionStatus`. */
  type: string;
  payload: string;
  /** Why no delivery was queued (no URL, not subscribed, disabled); null when one was. */
  skip_reason: string | null;
  created_at: number;
}

/** The delivery queue, one row per event to send (Graphile-Worker shape; times in epoch milliseconds). */
export interface WebhookDeliveriesTable {
  event_id: string;
  /** The endpoint (`webhook_endpoints.id`) it goes to; `''` for the instance's default webhook (migration 0017). */
  endpoint_id: Generated<string>;
  instance_id: string;
  sequence: number;
  /** `pending` (queued or in flight) | `delivered` | `failed`. */
  status: string;
  /** Attempts made in the current round (a redelivery starts a new round). */
  attempts: number;
  max_attempts: number;
  /** Epoch ms when the next attempt is due. */
  run_at: number;
  /** Worker id holding the claim while an attempt is in flight. */
  locked_by: string | null;
  /** Epoch ms of the claim; older than the stale timeout means its worker died. */
  locked_at: number | null;
  last_error: string | null;
  last_status: number | null;
  delivered_at: number | null;
  created_at: number;
  updated_at: number;
}

/**
 * One HTTP attempt of a delivery (docs/decisions/0005-outbox-and-delivery.md delivery log), written at claim time and
 * completed after.
 */
export interface WebhookAttemptsTable {
  id: string;
  event_id: string;
  /** The endpoint the attempt went to; `''` for the instance's default webhook (migration 0017). */
  endpoint_id: Generated<string>;
  /** 1-based, counting every attempt of the event across redeliveries. */
  number: number;
  url: string;
  worker: string;
  attempted_at: number;
  /** When the attempt ended; null while in flight (or if its worker died: then `error` says it was abandoned). */
  finished_at: number | null;
  /** HTTP status; null when no response arrived. */
  status_code: number | null;
  /** Milliseconds from the start of the request to the end of the response; null until finished. */
  duration_ms: number | null;
  error: string | null;
  /** First 2 KB of the response body as text. */
  response_body: string | null;
  /** 1 when the response body was longer than what is stored. */
  response_truncated: number;
}

/**
 * An extra webhook endpoint of an instance (migration 0017, docs/decisions/0035-webhook-endpoints.md). Times are
 * epoch ms.
 */
export interface WebhookEndpointsTable {
  id: string;
  instance_id: string;
  url: string;
  /** JSON array of the subscribed event types. */
  events: string;
  description: string | null;
  /** The signing secret (`whsec_…`) sealed with the SecretBox. */
  secret: string;
  /**
   * The secret the last `rotate-secret` replaced, sealed as `secret` is, while it may still sign (migration 0031,
   * docs/decisions/0094-secret-rotation-grace.md); null when there is none.
   */
  previous_secret: string | null;
  /**
   * When `previous_secret` stops signing, epoch ms (an attempt started at or after it is signed with `secret` only);
   * null with it.
   */
  previous_secret_expires_at: number | null;
  /**
   * A broker URL carrying a password or token, whole, sealed with the SecretBox (`url` shows it masked); null
   * otherwise (migration 0018).
   */
  url_sealed: string | null;
  /** 1 when deliveries are made; 0 after `PATCH enabled: false` or a 410 Gone. */
  enabled: number;
  /** When a 410 Gone disabled it; null otherwise. */
  disabled_at: number | null;
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
  /**
   * A random number the store's triggers draw anew at every insert and update of the row (below 2^52; migration
   * 0023, docs/decisions/0065-routing-version.md); never written by the service. PostgreSQL's bigint reads as a
   * string.
   */
  routing_stamp: Generated<number | string>;
}
