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

/** The whole database as Kysely sees it; later migrations add their tables here. */
export interface Database {
  organizations: OrganizationsTable;
  instances: InstancesTable;
  api_keys: ApiKeysTable;
  engine_auth: EngineAuthTable;
  instance_locks: InstanceLocksTable;
}
