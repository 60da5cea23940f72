import { type Kysely, sql, type Updateable } from 'kysely';
import { extended } from '../domain/objects.ts';
import type { Database, IdempotencyKeysTable } from './schema.ts';

/**
 * Queries of the `idempotency_keys` table (migration 0014, docs/decisions/0010-idempotency.md). A claim is one
 * insert that does nothing on conflict with the primary key (organization, environment, key), followed, when a row
 * was there, by one conditional update that takes over only an expired row or an unfinished claim past its lock made
 * by a request with the same fingerprint: two requests racing for one key on any number of nodes never both win, on
 * SQLite and PostgreSQL alike. Every later change names the claim's token, so a request whose claim was taken over
 * changes nothing.
 */

/** Which key a query is about: the organization and environment of the API key, and the header's value. */
export interface IdempotencyKeyId {
  orgId: string;
  env: string;
  key: string;
}

/** A row another request holds or finished under the key. Times are epoch ms. */
export interface IdempotencyRecord {
  fingerprint: string;
  /** The kept answer, once the first request finished below 500; undefined while it runs. */
  answer: KeptAnswer | undefined;
  lockedUntil: number;
  expiresAt: number;
}

/**
 * An answer kept for replay: HTTP status, `Content-Type` (when it had one), the body exactly as sent, and the
 * answer's own headers a replay sends again (lowercase names; src/http/plugins/idempotency.ts says which).
 */
export interface KeptAnswer {
  status: number;
  contentType: string | undefined;
  body: string;
  headers: Readonly<Record<string, string>>;
}

/** Kept headers as stored: a JSON object, or null for none. */
function storedHeaders(headers: Readonly<Record<string, string>>): string | null {
  return Object.keys(headers).length === 0 ? null : JSON.stringify(headers);
}

/** Stored headers read back; what is not an object of strings reads as none. */
function keptHeaders(stored: string | null): Record<string, string> {
  if (stored === null) return {};
  const parsed: unknown = JSON.parse(stored);
  if (typeof parsed !== 'object' || parsed === null) return {};
  return Object.fromEntries(
    Object.entries(parsed).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

/** Input of {@link claimIdempotencyKey}. Times are epoch ms. */
export interface ClaimInput extends IdempotencyKeyId {
  /** Lowercase hex SHA-256 of the request (method, path with query, body bytes). */
  fingerprint: string;
  /** UUID naming this claim in later updates. */
  token: string;
  /** A new UUID for the request, kept unless this claim takes over an unfinished one (see {@link ClaimOutcome}). */
  requestId: string;
  now: number;
  /** Until when the claim blocks other requests unless renewed. */
  lockedUntil: number;
  /** When the key (and the answer it will keep) is forgotten. */
  expiresAt: number;
}

/**
 * What {@link claimIdempotencyKey} found: the claim is ours, with `requestId` the UUID of the request it continues
 * (`idempotency_keys.request_id`: kept by a takeover of an unfinished claim, `input.requestId` for a new or expired
 * row), or another request's row.
 */
export type ClaimOutcome =
  | { claimed: true; requestId: string }
  | { claimed: false; existing: IdempotencyRecord };

const where = (id: IdempotencyKeyId) => ({ org_id: id.orgId, env: id.env, key: id.key });

/**
 * Claims the key for the request `input.token`: inserts the row, or takes over a row that expired, or an unfinished
 * claim past its lock (its process died, or its run ended with an answer that decided nothing,
 * {@link endIdempotencyClaim}) whose fingerprint is `input.fingerprint`, or finds the unfinished row of the same
 * `input.token` (an earlier try of this claim committed and its answer was lost: claimed). Otherwise returns the row
 * found, for the caller to replay its answer or refuse: an unfinished claim of another fingerprint is never taken over,
 * so the key reused with another request is refused (422) while the first one's work may still go on. A takeover of an
 * unfinished claim keeps the row's `request_id`: the request is the same one retried, and what it did before is
 * found by it (docs/decisions/0010-idempotency.md).
 * @throws the driver's error when the store fails.
 */
export async function claimIdempotencyKey(db: Kysely<Database>, input: ClaimInput): Promise<ClaimOutcome> {
  const row = extended(where(input), {
    fingerprint: input.fingerprint,
    token: input.token,
    locked_until: input.lockedUntil,
    status: null,
    content_type: null,
    body: null,
    headers: null,
    request_id: input.requestId,
    created_at: input.now,
    expires_at: input.expiresAt,
  });
  // A row deleted between the statements (its claim released) is tried again; three rounds settle any race.
  for (let round = 0; round < 3; round++) {
    const inserted = await db
      .insertInto('idempotency_keys')
      .values(row)
      .onConflict((oc) => oc.columns(['org_id', 'env', 'key']).doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0)
      return { claimed: true, requestId: input.requestId };
    const { org_id: _org, env: _env, key: _key, request_id: _request, ...fields } = row;
    const taken = await db
      .updateTable('idempotency_keys')
      .set(
        extended(fields, {
          // An expired row starts a new request; an unfinished claim is taken over by the same request only (the
          // fingerprint is compared below), which continues as itself.
          request_id: sql<string>`case when expires_at <= ${input.now} or request_id is null then ${input.requestId} else request_id end`,
        }),
      )
      .where('org_id', '=', input.orgId)
      .where('env', '=', input.env)
      .where('key', '=', input.key)
      .where((eb) =>
        eb.or([
          eb('expires_at', '<=', input.now),
          // An unfinished claim past its lock, by the same request: the key reused with another request is refused
          // (422) however the first run ended, as its work may still go on.
          eb.and([
            eb('status', 'is', null),
            eb('locked_until', '<=', input.now),
            eb('fingerprint', '=', input.fingerprint),
          ]),
          // This claim's own row: an earlier try of it committed and its answer was lost.
          eb.and([eb('status', 'is', null), eb('token', '=', input.token)]),
        ]),
      )
      .returning('request_id')
      .executeTakeFirst();
    if (taken !== undefined) return { claimed: true, requestId: taken.request_id ?? input.requestId };
    const existing = await findIdempotencyKey(db, input);
    if (existing) return { claimed: false, existing };
  }
  throw new Error(`idempotency key ${input.key} changed hands three times during one claim`);
}

/** The row of the key, if any (expired or not). */
export async function findIdempotencyKey(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
): Promise<IdempotencyRecord | undefined> {
  const row = await db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'status', 'content_type', 'body', 'headers', 'locked_until', 'expires_at'])
    .where('org_id', '=', id.orgId)
    .where('env', '=', id.env)
    .where('key', '=', id.key)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    fingerprint: row.fingerprint,
    answer:
      row.status === null
        ? undefined
        : {
            status: row.status,
            contentType: row.content_type ?? undefined,
            body: row.body ?? '',
            headers: keptHeaders(row.headers),
          },
    lockedUntil: Number(row.locked_until),
    expiresAt: Number(row.expires_at),
  };
}

/**
 * Keeps `answer` under the key claimed by `token`.
 * @returns false when the claim is no longer this token's (taken over after its lock passed).
 */
export async function keepIdempotentAnswer(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
  token: string,
  answer: KeptAnswer,
): Promise<boolean> {
  return updateOwnClaim(db, id, token, {
    status: answer.status,
    content_type: answer.contentType ?? null,
    body: answer.body,
    headers: storedHeaders(answer.headers),
  });
}

/** Pushes the lock of the unfinished claim `token` to `lockedUntil` (epoch ms). @returns false when not ours. */
export async function renewIdempotencyClaim(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
  token: string,
  lockedUntil: number,
): Promise<boolean> {
  return updateOwnClaim(db, id, token, { locked_until: lockedUntil });
}

/** Applies `set` to the unfinished claim `token` of key `id`; false when the claim is not (or no longer) this one. */
async function updateOwnClaim(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
  token: string,
  set: Updateable<IdempotencyKeysTable>,
): Promise<boolean> {
  const updated = await db
    .updateTable('idempotency_keys')
    .set(set)
    .where('org_id', '=', id.orgId)
    .where('env', '=', id.env)
    .where('key', '=', id.key)
    .where('token', '=', token)
    .where('status', 'is', null)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) > 0;
}

/** Deletes the unfinished claim `token`, so the next request with the key runs. A kept answer is never deleted. */
export async function releaseIdempotencyClaim(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
  token: string,
): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('org_id', '=', id.orgId)
    .where('env', '=', id.env)
    .where('key', '=', id.key)
    .where('token', '=', token)
    .where('status', 'is', null)
    .execute();
}

/**
 * Ends claim `token` without an answer and without forgetting its request (docs/decisions/0010-idempotency.md): the
 * row stays unfinished, its lock passed and its token replaced by `endedToken` (so a renewal already on its way
 * changes nothing), so the next request with the key and the same fingerprint takes it over at once and continues
 * under the same `request_id`, finding what this run left (a send's job may still go out); one with another
 * fingerprint is refused (422) until the row expires. No-op when the claim is no longer this token's or already kept
 * an answer.
 * @throws the driver's error when the store fails.
 */
export async function endIdempotencyClaim(
  db: Kysely<Database>,
  id: IdempotencyKeyId,
  token: string,
  endedToken: string,
): Promise<void> {
  await updateOwnClaim(db, id, token, { locked_until: 0, token: endedToken });
}

/**
 * Deletes up to about `limit` rows whose `expires_at` (epoch ms) is at or before `now`, oldest first (rows sharing
 * the boundary time go together).
 * @returns how many rows were deleted.
 */
export async function purgeExpiredIdempotencyKeys(
  db: Kysely<Database>,
  now: number,
  limit: number,
): Promise<number> {
  const boundary = await db
    .selectFrom('idempotency_keys')
    .select('expires_at')
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .offset(Math.max(0, limit - 1))
    .limit(1)
    .executeTakeFirst();
  const upTo = boundary ? Math.min(Number(boundary.expires_at), now) : now;
  const deleted = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', upTo).executeTakeFirst();
  return Number(deleted.numDeletedRows);
}
