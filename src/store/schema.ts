import type { ColumnType, Generated } from 'kysely';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
  WebhookEventsTable,
  WebhookStateTable,
} from './schema-webhooks.ts';

/**
 * Table shapes shared by SQLite and PostgreSQL. Every time column (`*_at`, `timestamp`, `expires_at`, …) holds epoch
 * milliseconds, an integer (`bigint`; migration 0015, docs/decisions/0027-times-as-epoch-ms.md); lists are JSON text.
 */
export interface OrganizationsTable {
  id: string;
  name: string;
  plan: string;
  per_minute: number | null;
  per_day: number | null;
  created_at: number;
  /**
   * Enterprise only: the organization's own cap on instances per environment (migration 0016,
   * docs/decisions/0029-instances-over-the-api.md); null: the plan's.
   */
  max_instances: number | null;
}

/**
 * An instance: one linked number of an organization in one environment
 * (docs/decisions/0029-instances-over-the-api.md).
 */
export interface InstancesTable {
  id: string;
  org_id: string;
  env: string;
  name: string;
  /** Linked account's phone number once logged in (digits only). */
  phone: string | null;
  /** Linked account's device-qualified JID once logged in. */
  jid: string | null;
  push_name: string | null;
  webhook_url: string | null;
  /**
   * JSON array of subscribed event types; null until the first connect (docs/decisions/0016-session-lifecycle.md).
   */
  subscribe: string | null;
  /** HMAC key sealed with the master key (docs/decisions/0020-security-promises.md). */
  hmac_key: string | null;
  /**
   * `connected` when the user asked for a live session; restored at boot (docs/decisions/0016-session-lifecycle.md).
   */
  desired_state: string;
  last_connected_at: number | null;
  created_at: number;
  /**
   * A random number the store's trigger draws anew at every update of the row (below 2^52; migration 0023,
   * docs/decisions/0065-routing-version.md); never written by the service. PostgreSQL's bigint reads as a string.
   */
  routing_version: Generated<number | string>;
  /**
   * How many logouts of the instance the store recorded (migration 0039): moved in the transaction of a logout's
   * cancel of the pending sends; a new send job is inserted only while it holds the value its send was accepted under
   * (docs/decisions/0074-logout-cancels-pending-sends.md).
   */
  account_generation: Generated<number>;
}

/** An API key: its hash, scopes, environment and organization (docs/decisions/0003-scopes-and-keys.md). */
export interface ApiKeysTable {
  id: string;
  org_id: string;
  env: string;
  name: string;
  prefix: string;
  key_hash: string;
  /** JSON array of scopes. */
  scopes: string;
  /**
   * JSON array of instance ids the key may address; empty = all of the org in its env
   * (docs/decisions/0003-scopes-and-keys.md).
   */
  instance_ids: string;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  created_at: number;
}

/** Engine credentials and platform state, one sealed JSON value per (instance, category, key id). */
export interface EngineAuthTable {
  instance_id: string;
  category: string;
  key_id: string;
  value: string;
  updated_at: number;
}

/** One-socket lock of a live instance (migration 0004): the process holding it renews `expires_at` on a heartbeat. */
export interface InstanceLocksTable {
  instance_id: string;
  /** Which process holds the lock (the engine's `processId`). */
  owner: string;
  acquired_at: number;
  expires_at: number;
}

/**
 * A gateway request signature already used (migration 0005, docs/decisions/0021-gateway-form.md): kept until it
 * leaves the window.
 */
export interface GatewayReplayTable {
  instance_id: string;
  /** Lowercase hex HMAC-SHA256 of the request. */
  signature: string;
  /** Epoch ms: the signature's timestamp plus the window (and 1 s); the row may be pruned after it. */
  expires_at: number;
}

/**
 * A sent or received message (migration 0002, docs/decisions/0017-messages-and-media.md). `from_me`/`is_group` are
 * 0/1; `content` is the JSON of `MessageContent`; `state` is `sent` → `delivered` → `read` → `played`, never moving
 * backwards.
 */
export interface MessagesTable {
  instance_id: string;
  /** The platform's message id. */
  id: string;
  /** Chat JID (user or group). */
  chat: string;
  /** Sender JID. */
  sender: string;
  from_me: number;
  is_group: number;
  /**
   * `MessageKind`: text, image, document, audio, video, sticker, location, contact, reaction, poll,
   * interactive_reply, other (at most 20 characters, the column's width).
   */
  type: string;
  content: string;
  push_name: string;
  /** When the message was sent (epoch ms). */
  timestamp: number;
  state: string;
  /** When `state` last changed (epoch ms). */
  state_at: number;
  created_at: number;
}

/**
 * A user the instance exchanged messages with (migration 0002; the contacts list, docs/decisions/0004-sandbox.md).
 */
export interface ChatPeersTable {
  instance_id: string;
  /** Plain user JID `<phone>@s.whatsapp.net`. */
  jid: string;
  /** The latest non-empty display name the user's own messages carried; empty until one arrives. */
  push_name: string;
  first_at: number;
  last_at: number;
}

/** One running parley process (the node registry, `src/nodes/registry.ts`). */
export interface NodesTable {
  /** Random per boot unless `NODE_ID` names it; the `locked_by` of the node's webhook claims. */
  id: string;
  /** `os.hostname()` of the node. */
  host: string;
  /** Operating-system process id on `host`. */
  pid: number;
  /** When the process started, epoch ms. */
  started_at: number;
  /** Last heartbeat, epoch ms. */
  heartbeat_at: number;
  /** Base URL other nodes forward requests to (migration 0012); null until the node listens. */
  url: ColumnType<string | null, string | null | undefined, string | null>;
  /** 1 while the node hands its instances over before exiting (migration 0012). */
  draining: ColumnType<number, number | undefined, number>;
  /**
   * The process-id space of `pid` (migration 0032): boot id and PID namespace, `<boot id>/pid:[<inode>]`; null when
   * unknown (docs/decisions/0008-leases-and-fencing.md, "Node identity").
   */
  process_space: ColumnType<string | null, string | null | undefined, string | null>;
  /** Random per start of the registry (migration 0032): which process holds the row; null: an older version's. */
  incarnation: ColumnType<string | null, string | null | undefined, string | null>;
}

/** The lease of an instance's engine session (migration 0012, `src/nodes/leases.ts`). */
export interface InstanceLeasesTable {
  instance_id: string;
  /** The node id holding the session. */
  owner: string;
  /** Fencing token: incremented on every change of owner. */
  token: number;
  /** Epoch ms after which the lease is free unless renewed. */
  expires_at: number;
}

/** A rate-limit window kept across restarts (`src/store/rate-limit-windows.ts`). */
export interface RateLimitWindowsTable {
  /** Window name, quota and counted key, e.g. `day:1000:<orgId>:<env>`. */
  key: string;
  /** Requests consumed in the window. */
  consumed: number;
  /** When the window resets, epoch ms. */
  reset_at: number;
}

/** A person who signs in to the dashboard (migration 0010, docs/decisions/0022-dashboard.md). */
export interface DashboardUsersTable {
  id: string;
  org_id: string;
  /** Lowercased e-mail address, unique across the store. */
  email: string;
  /** Argon2id PHC string (`$argon2id$v=19$m=…`). */
  password_hash: string;
  /** `owner` | `member` | `viewer`. */
  role: string;
  created_at: number;
  last_sign_in_at: number | null;
}

/** A signed-in dashboard browser (migration 0010): only the SHA-256 of the cookie's session id is stored. */
export interface DashboardSessionsTable {
  /** Lowercase hex SHA-256 of the session id. */
  id_hash: string;
  user_id: string;
  /** The token every state-changing request must carry in `x-csrf-token`. */
  csrf_token: string;
  created_at: number;
  /** Epoch ms after which the session is refused. */
  expires_at: number;
}

/** An instance's call handling (migration 0011): reject incoming calls automatically, with an optional message. */
export interface CallSettingsTable {
  instance_id: string;
  /** 1: every incoming call offer is rejected as it arrives; 0: calls ring as usual. */
  reject: number;
  /** Text sent to the caller after an automatic reject; null sends nothing. */
  message: string | null;
  updated_at: number;
}

/**
 * One message-creating send, recorded before its relay (migration 0013, `src/store/send-jobs.ts`). Times are
 * epoch ms. `status`: pending, sending, sent, failed, canceled; `mode`: sync or async.
 */
export interface SendJobsTable {
  instance_id: string;
  /** The platform message id every relay attempt uses. */
  id: string;
  /** Acceptance order within the instance. */
  seq: number;
  /** Chat JID the message goes to. */
  chat: string;
  /** `OutgoingContent['kind']`. */
  kind: string;
  /** The `OutgoingMessage` as JSON, media bytes base64 (`src/sends/payload.ts`). */
  payload: string;
  mode: string;
  status: string;
  /**
   * When the job may first go, and with `seq` its place in the instance's acceptance order: its `sendAt`, else its
   * acceptance; a hold of the new-chats pace or the reach-out timelock moves it (docs/decisions/0013-pacing.md). A job
   * waiting for a new-chat slot has `SLOT_WAIT` (2^50) added until a freed slot releases it
   * (src/store/send-job-slots.ts).
   */
  run_at: number;
  /** The `sendAt` asked for, when the send was scheduled. */
  send_at: number | null;
  attempts: ColumnType<number, number | undefined, number>;
  max_attempts: number;
  last_error: string | null;
  locked_by: string | null;
  locked_at: number | null;
  /** 1 when the relay opened a chat the account had no messages in. */
  new_chat: ColumnType<number, number | undefined, number>;
  created_at: number;
  updated_at: number;
  sent_at: number | null;
  /**
   * When a logout found the job being relayed (migration 0024): it is canceled instead of being made `pending`
   * again (docs/decisions/0074-logout-cancels-pending-sends.md). On a `sent` job: the relay was the account's that
   * logged out then, which the new-chats count leaves out (docs/decisions/0013-pacing.md).
   */
  logged_out_at: number | null;
  /**
   * When a job a failed relay put back may be tried again (migration 0029), 0 when it need not wait: `run_at` keeps
   * its place in acceptance order, and the instance's later jobs wait behind it (docs/decisions/0009-sends-as-jobs.md).
   */
  not_before: ColumnType<number, number | undefined, number>;
}

/** An instance's send pace and restriction pause (migration 0013). Times epoch ms. */
export interface SendPacingTable {
  instance_id: string;
  min_interval_ms: number;
  jitter_ms: number;
  new_chats_per_day: number | null;
  paused_reason: string | null;
  paused_until: number | null;
  /** The platform's reach-out timelock: until when (epoch ms) sends that open a chat wait (migration 0027). */
  new_chats_locked_until: number | null;
  /** The timelock's reason, as the platform worded it. */
  new_chats_lock_reason: string | null;
  updated_at: number;
}

/**
 * An `Idempotency-Key` of an organization's environment (migration 0014, docs/decisions/0010-idempotency.md):
 * the claim of the request running under it, then its kept answer.
 */
export interface IdempotencyKeysTable {
  org_id: string;
  /** `test` | `live`: the environment of the key that sent the request. */
  env: string;
  /** The header's value, 1 to 255 printable ASCII characters. */
  key: string;
  /** Lowercase hex SHA-256 over the method, the path with query and the raw body bytes. */
  fingerprint: string;
  /** UUID of the claim held by the request running (or that ran) under the key. */
  token: string;
  /** Epoch ms after which an unfinished claim may be taken over (its process died). */
  locked_until: number;
  /** The kept answer's HTTP status (below 500); null while the first request runs. */
  status: number | null;
  content_type: string | null;
  /** The kept answer's body, exactly as sent. */
  body: string | null;
  /** The kept answer's own headers a replay sends again, a JSON object (migration 0025); null: none. */
  headers: string | null;
  /**
   * UUID of the request the claim belongs to (migration 0026): new at a first claim or after expiry, kept by the
   * takeover of an unfinished claim; null for rows claimed before the migration.
   */
  request_id: string | null;
  created_at: number;
  /** Epoch ms when the key is forgotten (24 h after the claim); the periodic purge deletes the row. */
  expires_at: number;
}

/** The whole database as Kysely sees it; later migrations add their tables here. */
export interface Database {
  organizations: OrganizationsTable;
  instances: InstancesTable;
  api_keys: ApiKeysTable;
  engine_auth: EngineAuthTable;
  messages: MessagesTable;
  chat_peers: ChatPeersTable;
  instance_locks: InstanceLocksTable;
  webhook_state: WebhookStateTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_endpoints: WebhookEndpointsTable;
  gateway_replay: GatewayReplayTable;
  nodes: NodesTable;
  instance_leases: InstanceLeasesTable;
  rate_limit_windows: RateLimitWindowsTable;
  dashboard_users: DashboardUsersTable;
  dashboard_sessions: DashboardSessionsTable;
  call_settings: CallSettingsTable;
  send_jobs: SendJobsTable;
  send_pacing: SendPacingTable;
  idempotency_keys: IdempotencyKeysTable;
  lid_mappings: LidMappingsTable;
  held_receipts: HeldReceiptsTable;
  labels: LabelsTable;
  chat_labels: ChatLabelsTable;
  recorded_updates: RecordedUpdatesTable;
}

/**
 * A recipient's receipt held for a send job whose message is not recorded yet (migration 0038,
 * docs/decisions/0104-receipts-before-their-send.md): `state` `delivered`, `read` or `played`; `sender` the user who
 * acknowledged; `receipt` the receipt's `source` and `timestamp` as JSON; `held_at` epoch ms. Primary key
 * (instance_id, message_id, state, sender); rows go with their send job.
 */
export interface HeldReceiptsTable {
  instance_id: string;
  message_id: string;
  state: string;
  sender: string;
  receipt: string;
  held_at: number;
}

/**
 * One phone↔LID pair an instance's platform told it (migration 0019, docs/decisions/0038-lid-mappings.md): `lid` and
 * `phone` digits only, `updated_at` epoch ms of the last sighting. Primary key (instance_id, lid).
 */
export interface LidMappingsTable {
  instance_id: string;
  lid: string;
  phone: string;
  updated_at: number;
}

/**
 * One label of an instance's account as parley last saw it (migration 0020, docs/decisions/0045-business-labels.md):
 * `label_id` the platform's id, `color` 0 to 19, `predefined_id` null for a label the account made, `updated_at`
 * epoch ms. Primary key (instance_id, label_id).
 */
export interface LabelsTable {
  instance_id: string;
  label_id: string;
  name: string;
  color: number;
  predefined_id: string | null;
  updated_at: number;
}

/**
 * One label on one chat of an instance (migration 0020, docs/decisions/0045-business-labels.md): `chat` the chat JID,
 * `updated_at` epoch ms. Primary key (instance_id, chat, label_id).
 */
export interface ChatLabelsTable {
  instance_id: string;
  chat: string;
  label_id: string;
  updated_at: number;
}

/**
 * The platform message id of an edit, a deletion for everyone or a poll vote an instance recorded, the notification id
 * and place of a group change, or the step of a call (`call/<call id>/offer`, `call/<call id>/end`) (migration 0037,
 * docs/decisions/0024-engines-and-data-flow.md): a repeat of it is left out (src/events/message-copies.ts).
 * `created_at` epoch ms. Primary key (instance_id, id).
 */
export interface RecordedUpdatesTable {
  instance_id: string;
  id: string;
  created_at: number;
}
