/**
 * Table shapes shared by SQLite and PostgreSQL. Timestamps are RFC 3339 UTC text of fixed width
 * (`Date#toISOString`), so they sort correctly as text on both dialects; lists are JSON text.
 */
export interface OrganizationsTable {
  id: string;
  name: string;
  plan: string;
  per_minute: number | null;
  per_day: number | null;
  created_at: string;
}

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
  /** JSON array of subscribed event types; null until the first connect (DESIGN D7). */
  subscribe: string | null;
  /** HMAC key sealed with the master key (DESIGN D11). */
  hmac_key: string | null;
  /** `connected` when the user asked for a live session; restored at boot (DESIGN D7). */
  desired_state: string;
  last_connected_at: string | null;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  env: string;
  name: string;
  prefix: string;
  key_hash: string;
  /** JSON array of scopes. */
  scopes: string;
  /** JSON array of instance ids the key may address; empty = all of the org in its env (DESIGN D3). */
  instance_ids: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  created_at: string;
}

/** Engine credentials and platform state, one sealed JSON value per (instance, category, key id). */
export interface EngineAuthTable {
  instance_id: string;
  category: string;
  key_id: string;
  value: string;
  updated_at: string;
}

/** One-socket lock of a live instance (migration 0004): the process holding it renews `expires_at` on a heartbeat. */
export interface InstanceLocksTable {
  instance_id: string;
  /** Which process holds the lock (the engine's `processId`). */
  owner: string;
  acquired_at: string;
  expires_at: string;
}

/**
 * A sent or received message (migration 0002, DESIGN D8). `from_me`/`is_group` are 0/1; `content` is the JSON of
 * `MessageContent`; `state` is `sent` → `delivered` → `read` → `played`, never moving backwards.
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
  /** `MessageKind`: text, image, document, audio, video, sticker, location, contact, reaction, other. */
  type: string;
  content: string;
  push_name: string;
  /** When the message was sent (RFC 3339). */
  timestamp: string;
  state: string;
  /** When `state` last changed (RFC 3339). */
  state_at: string;
  created_at: string;
}

/** A user the instance exchanged messages with (migration 0002; the contacts list, DESIGN D9). */
export interface ChatPeersTable {
  instance_id: string;
  /** Plain user JID `<phone>@s.whatsapp.net`. */
  jid: string;
  /** The latest non-empty display name the user's own messages carried; empty until one arrives. */
  push_name: string;
  first_at: string;
  last_at: string;
}

/** A gateway request signature already used (migration 0005, DESIGN D12): kept until it leaves the window. */
export interface GatewayReplayTable {
  instance_id: string;
  /** Lowercase hex HMAC-SHA256 of the request. */
  signature: string;
  /** RFC 3339: the signature's timestamp plus the window; the row may be pruned after it. */
  expires_at: string;
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
  gateway_replay: GatewayReplayTable;
}
