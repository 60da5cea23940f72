import { randomUUID } from 'node:crypto';
import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Environment } from '../domain/environment.ts';
import { SCOPES, type Scope } from '../domain/scope.ts';
import { nowIso } from './database.ts';
import { signalChannel } from './pg-signals.ts';
import type { ApiKeysTable, Database } from './schema.ts';
import { toIso, toMs } from './times.ts';

/**
 * A stored API key: never the key itself, only its SHA-256 and display prefix
 * (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0020-security-promises.md). Times are RFC 3339 UTC (the
 * columns hold epoch ms, docs/decisions/0027-times-as-epoch-ms.md).
 */
export interface ApiKeyRecord {
  id: string;
  orgId: string;
  env: Environment;
  name: string;
  prefix: string;
  keyHash: string;
  scopes: Scope[];
  /** Instance ids this key may address; empty = every instance of the org in its env. */
  instanceIds: string[];
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  createdAt: string;
}

function parseList(text: string): string[] {
  const value: unknown = JSON.parse(text);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function toApiKey(row: ApiKeysTable): ApiKeyRecord {
  return {
    id: row.id,
    orgId: row.org_id,
    env: row.env === 'live' ? 'live' : 'test',
    name: row.name,
    prefix: row.prefix,
    keyHash: row.key_hash,
    scopes: parseList(row.scopes).filter((s): s is Scope => SCOPES.includes(s as Scope)),
    instanceIds: parseList(row.instance_ids),
    expiresAt: toIso(row.expires_at),
    revokedAt: toIso(row.revoked_at),
    lastUsedAt: toIso(row.last_used_at),
    createdAt: toIso(row.created_at),
  };
}

/** Input of {@link insertApiKey}: the hash and prefix come from `generateApiKey`. */
export interface NewApiKey {
  orgId: string;
  env: Environment;
  name: string;
  prefix: string;
  keyHash: string;
  scopes: Scope[];
  instanceIds: string[];
  /** RFC 3339; null: the key never expires. */
  expiresAt: string | null;
}

/** Stores a key record. @throws RangeError when `expiresAt` is not a time. */
export async function insertApiKey(db: Kysely<Database>, input: NewApiKey): Promise<ApiKeyRecord> {
  const row: ApiKeysTable = {
    id: randomUUID(),
    org_id: input.orgId,
    env: input.env,
    name: input.name,
    prefix: input.prefix,
    key_hash: input.keyHash,
    scopes: JSON.stringify(input.scopes),
    instance_ids: JSON.stringify(input.instanceIds),
    expires_at: toMs(input.expiresAt),
    revoked_at: null,
    last_used_at: null,
    created_at: Date.now(),
  };
  await db.insertInto('api_keys').values(row).execute();
  return toApiKey(row);
}

/** Looks a key up by the SHA-256 of its value (unique index). */
export async function findApiKeyByHash(
  db: Kysely<Database>,
  keyHash: string,
): Promise<ApiKeyRecord | undefined> {
  const row = await db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
  return row ? toApiKey(row) : undefined;
}

/** Loads a key record by id. */
export async function getApiKey(db: Kysely<Database>, id: string): Promise<ApiKeyRecord | undefined> {
  const row = await db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? toApiKey(row) : undefined;
}

/** Keys of an organization, newest first. */
export async function listApiKeys(db: Kysely<Database>, orgId: string): Promise<ApiKeyRecord[]> {
  const rows = await db
    .selectFrom('api_keys')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('created_at', 'desc')
    .execute();
  return rows.map(toApiKey);
}

/**
 * Marks a key revoked at `at` (RFC 3339; idempotent: a second call keeps the first time). On PostgreSQL the same
 * transaction signals the revocation to every node listening on the store (`pg_notify` on the `keys` topic, sent by
 * the server when the transaction commits; docs/decisions/0078-store-signals.md), so their cached verifications go
 * at once rather than at their next poll; the signal names no node (`-`), so the node that revoked hears it too.
 * @returns the updated record, or undefined when no key has that id.
 */
export async function revokeApiKey(
  db: Kysely<Database>,
  id: string,
  at: string = nowIso(),
): Promise<ApiKeyRecord | undefined> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.transaction().execute(async (trx) => {
    const result = await trx
      .updateTable('api_keys')
      .set({ revoked_at: toMs(at) })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (postgres && result.numUpdatedRows > 0n) {
      await sql`select pg_notify(${signalChannel('keys')}, replace(replace(current_schema(), '%', '%25'), ' ', '%20') || ' - ' || ${id})`.execute(
        trx,
      );
    }
  });
  return getApiKey(db, id);
}

/** Digests asked per statement by {@link revokedAmong}, well below SQLite's bound on parameters. */
const HASHES_PER_READ = 500;

/**
 * Which of the keys `keyHashes` (SHA-256 digests, lowercase hex) can no longer be used as far as the store says:
 * those revoked, at whatever time they were stamped, and those with no row. Read by digest (unique index), 500 a
 * statement; for evicting cached verifications in every process without comparing clocks
 * (docs/decisions/0119-revocation-look-reads-the-cached-keys.md).
 */
export async function revokedAmong(db: Kysely<Database>, keyHashes: readonly string[]): Promise<Set<string>> {
  const usable = new Set<string>();
  for (let start = 0; start < keyHashes.length; start += HASHES_PER_READ) {
    const rows = await db
      .selectFrom('api_keys')
      .select('key_hash')
      .where('key_hash', 'in', keyHashes.slice(start, start + HASHES_PER_READ))
      .where('revoked_at', 'is', null)
      .execute();
    for (const row of rows) usable.add(row.key_hash);
  }
  return new Set(keyHashes.filter((hash) => !usable.has(hash)));
}

/** Records that the key was used at `at` (RFC 3339). */
export async function touchApiKey(db: Kysely<Database>, id: string, at: string): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ last_used_at: toMs(at) })
    .where('id', '=', id)
    .execute();
}
