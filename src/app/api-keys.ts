import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.ts';
import { SCOPES, type Scope } from '../domain/scope.ts';
import { generateApiKey } from '../security/api-keys.ts';
import { type ApiKeyRecord, insertApiKey, listApiKeys, revokeApiKey } from '../store/api-keys.ts';
import { getInstance } from '../store/instances.ts';
import type { Database } from '../store/schema.ts';
import { type FieldStyle, invalidField, parseEnv } from './admin-input.ts';
import { requireOrg } from './organizations.ts';

export type { ApiKeyRecord } from '../store/api-keys.ts';

const DURATION = /^(\d+)(s|m|h|d)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Parses a duration such as `90s`, `10m`, `12h`, `30d` (docs/cli.md) into milliseconds.
 * @throws DomainError invalid when the text is not a positive whole number followed by s, m, h or d (the message
 *   names the field `--expires-in`, or `expiresIn` in the `api` style).
 */
export function parseDuration(text: string, style: FieldStyle = 'cli'): number {
  const match = DURATION.exec(text.trim());
  const amount = Number(match?.[1]);
  const unit = match?.[2] as keyof typeof UNIT_MS | undefined;
  if (!match || unit === undefined || !Number.isSafeInteger(amount) || amount <= 0) {
    throw invalidField(
      style,
      'expires-in',
      ` must be a duration such as 90s, 10m, 12h or 30d (got "${text}")`,
    );
  }
  return amount * UNIT_MS[unit];
}

/** The latest expiry a key can have: the last millisecond of year 9999, the last time RFC 3339 can write. */
const LAST_EXPIRY = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * The RFC 3339 time `expiresIn` after `now`.
 * @throws DomainError invalid naming the field when the duration is not one, or would end after year 9999.
 */
function expiryTime(now: number, expiresIn: string, style: FieldStyle): string {
  const at = now + parseDuration(expiresIn, style);
  if (!(at <= LAST_EXPIRY))
    throw invalidField(style, 'expires-in', ` must end by the year 9999 (got "${expiresIn}")`);
  return new Date(at).toISOString();
}

/**
 * The longest key name, in characters: the dashboard's form, the CLI and every other caller of
 * {@link adminCreateKey} share it (docs/cli.md).
 */
export const MAX_KEY_NAME = 60;

/**
 * A created key: the record plus the full key, which is shown once and never stored
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export interface CreatedKey {
  record: ApiKeyRecord;
  key: string;
}

/**
 * Creates an API key (`parley key create`, the dashboard's keys page): scopes default to `chat:*`; `instances` must
 * be instances of the same organization and environment; `expiresIn` is a duration such as `30d`. `style` says how
 * errors name the fields (CLI options by default).
 * @throws DomainError not_found for an unknown organization; invalid naming the field that is wrong (env, scopes,
 *   instances, expires-in, a name longer than {@link MAX_KEY_NAME}).
 */
export async function adminCreateKey(
  db: Kysely<Database>,
  input: {
    org: string;
    env: string;
    name?: string;
    scopes?: string[];
    instances?: string[];
    expiresIn?: string;
    style?: FieldStyle;
  },
  now: number = Date.now(),
): Promise<CreatedKey> {
  const style = input.style ?? 'cli';
  const org = await requireOrg(db, input.org);
  const env = parseEnv(input.env, style);
  const scopes = input.scopes && input.scopes.length > 0 ? input.scopes : ['chat:*'];
  for (const scope of scopes) {
    if (!SCOPES.includes(scope as Scope))
      throw invalidField(style, 'scopes', `: unknown scope ${scope} (allowed: ${SCOPES.join(', ')})`);
  }
  // `chat:*` is a choice of its own (docs/decisions/0003-scopes-and-keys.md): listed beside a narrower chat scope it
  // would grant more than the list seems to say.
  const narrower = scopes.find((scope) => scope !== 'chat:*' && scope.startsWith('chat:'));
  if (scopes.includes('chat:*') && narrower !== undefined)
    throw invalidField(
      style,
      'scopes',
      `: chat:* already grants ${narrower}: choose chat:* alone or the narrower chat scopes`,
    );
  const instanceIds = input.instances ?? [];
  for (const id of instanceIds) {
    const instance = await getInstance(db, id);
    if (!instance || instance.orgId !== org.id || instance.env !== env) {
      throw invalidField(style, 'instances', `: ${id} is not a ${env} instance of organization ${org.name}`);
    }
  }
  const name = input.name?.trim() || `${env} key`;
  if (name.length > MAX_KEY_NAME)
    throw invalidField(style, 'name', ` must be at most ${MAX_KEY_NAME} characters (got ${name.length})`);
  const expiresAt = input.expiresIn === undefined ? null : expiryTime(now, input.expiresIn, style);
  const generated = generateApiKey(env);
  const record = await insertApiKey(db, {
    orgId: org.id,
    env,
    name,
    prefix: generated.prefix,
    keyHash: generated.hash,
    scopes: [...new Set(scopes)] as Scope[],
    instanceIds,
    expiresAt,
  });
  return { record, key: generated.key };
}

/** Revokes a key (`parley key revoke`). @throws DomainError not_found `key X not found`. */
export async function adminRevokeKey(db: Kysely<Database>, id: string): Promise<ApiKeyRecord> {
  const record = await revokeApiKey(db, id);
  if (!record) throw errors.notFound(`key ${id} not found`);
  return record;
}

/**
 * Keys of an organization (`parley key list`), without any secret.
 * @throws DomainError not_found for an unknown organization.
 */
export async function adminListKeys(db: Kysely<Database>, org: string): Promise<ApiKeyRecord[]> {
  return listApiKeys(db, (await requireOrg(db, org)).id);
}
