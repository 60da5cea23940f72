import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DashboardUsersTable, Database } from './schema.ts';
import { toIso, toMs } from './times.ts';

/**
 * A dashboard user's role (docs/decisions/0022-dashboard.md): owner (everything, users too), member (instances, keys,
 * webhooks), viewer.
 */
export type DashboardRole = 'owner' | 'member' | 'viewer';
/** Every role, most privileged first. */
export const DASHBOARD_ROLES: readonly DashboardRole[] = ['owner', 'member', 'viewer'];

/** A stored dashboard user; `passwordHash` is an Argon2id PHC string, never a password. Times are RFC 3339. */
export interface DashboardUser {
  id: string;
  orgId: string;
  email: string;
  passwordHash: string;
  role: DashboardRole;
  createdAt: string;
  lastSignInAt: string | null;
}

/** A stored dashboard session: who, its CSRF token, and when it expires (epoch ms). */
export interface DashboardSessionRow {
  userId: string;
  csrfToken: string;
  expiresAt: number;
}

function toUser(row: DashboardUsersTable): DashboardUser {
  return {
    id: row.id,
    orgId: row.org_id,
    email: row.email,
    passwordHash: row.password_hash,
    role: DASHBOARD_ROLES.includes(row.role as DashboardRole) ? (row.role as DashboardRole) : 'viewer',
    createdAt: toIso(row.created_at),
    lastSignInAt: toIso(row.last_sign_in_at),
  };
}

/**
 * Inserts a user; `createdAt` is RFC 3339.
 * @throws the driver's unique-violation error when the e-mail is taken; RangeError when `createdAt` is not a time.
 */
export async function insertDashboardUser(
  db: Kysely<Database>,
  input: { orgId: string; email: string; passwordHash: string; role: DashboardRole; createdAt: string },
): Promise<DashboardUser> {
  const row: DashboardUsersTable = {
    id: randomUUID(),
    org_id: input.orgId,
    email: input.email,
    password_hash: input.passwordHash,
    role: input.role,
    created_at: toMs(input.createdAt),
    last_sign_in_at: null,
  };
  await db.insertInto('dashboard_users').values(row).execute();
  return toUser(row);
}

/** The user with this (lowercased) e-mail, if any. */
export async function findDashboardUserByEmail(
  db: Kysely<Database>,
  email: string,
): Promise<DashboardUser | undefined> {
  const row = await db
    .selectFrom('dashboard_users')
    .selectAll()
    .where('email', '=', email)
    .executeTakeFirst();
  return row ? toUser(row) : undefined;
}

/** The user with this id, if any. */
export async function getDashboardUser(db: Kysely<Database>, id: string): Promise<DashboardUser | undefined> {
  const row = await db.selectFrom('dashboard_users').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? toUser(row) : undefined;
}

/** Users of an organization (every organization when `orgId` is undefined), oldest first. */
export async function listDashboardUsers(db: Kysely<Database>, orgId?: string): Promise<DashboardUser[]> {
  let query = db.selectFrom('dashboard_users').selectAll();
  if (orgId !== undefined) query = query.where('org_id', '=', orgId);
  const rows = await query.orderBy('created_at').orderBy('email').execute();
  return rows.map(toUser);
}

/** How many owners an organization has (the last one may not be removed or demoted). */
export async function countOwners(db: Kysely<Database>, orgId: string): Promise<number> {
  const row = await db
    .selectFrom('dashboard_users')
    .select((eb) => eb.fn.countAll<string | number>().as('n'))
    .where('org_id', '=', orgId)
    .where('role', '=', 'owner')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Changes a user's role. @returns whether a row changed. */
export async function updateDashboardRole(
  db: Kysely<Database>,
  id: string,
  role: DashboardRole,
): Promise<boolean> {
  const result = await db
    .updateTable('dashboard_users')
    .set({ role })
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Records a successful sign-in at `at` (RFC 3339). */
export async function touchDashboardUser(db: Kysely<Database>, id: string, at: string): Promise<void> {
  await db
    .updateTable('dashboard_users')
    .set({ last_sign_in_at: toMs(at) })
    .where('id', '=', id)
    .execute();
}

/**
 * Deletes a user and its sessions in one transaction (the caller's when `db` is one). @returns whether the user
 * existed.
 */
export async function deleteDashboardUser(db: Kysely<Database>, id: string): Promise<boolean> {
  const run = async (trx: Kysely<Database>) => {
    await trx.deleteFrom('dashboard_sessions').where('user_id', '=', id).execute();
    const result = await trx.deleteFrom('dashboard_users').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  };
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

/**
 * Runs `change` in a transaction that first write-locks organization `orgId`'s row, so changes to its owners (the
 * last one may be neither removed nor demoted) run one at a time: a second change waits for the first to commit
 * and then counts the owners it left (PostgreSQL, read committed; SQLite runs write transactions one at a time).
 */
export async function withOrganizationLocked<T>(
  db: Kysely<Database>,
  orgId: string,
  change: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await trx
      .updateTable('organizations')
      .set((eb) => ({ id: eb.ref('id') }))
      .where('id', '=', orgId)
      .execute();
    return change(trx);
  });
}

/** Stores a session under the SHA-256 of its id; `createdAt` is RFC 3339, `expiresAt` epoch ms. */
export async function insertDashboardSession(
  db: Kysely<Database>,
  input: { idHash: string; userId: string; csrfToken: string; createdAt: string; expiresAt: number },
): Promise<void> {
  await db
    .insertInto('dashboard_sessions')
    .values({
      id_hash: input.idHash,
      user_id: input.userId,
      csrf_token: input.csrfToken,
      created_at: toMs(input.createdAt),
      expires_at: input.expiresAt,
    })
    .execute();
}

/** The session stored under `idHash`, expired or not. */
export async function findDashboardSession(
  db: Kysely<Database>,
  idHash: string,
): Promise<DashboardSessionRow | undefined> {
  const row = await db
    .selectFrom('dashboard_sessions')
    .select(['user_id', 'csrf_token', 'expires_at'])
    .where('id_hash', '=', idHash)
    .executeTakeFirst();
  return row
    ? { userId: row.user_id, csrfToken: row.csrf_token, expiresAt: Number(row.expires_at) }
    : undefined;
}

/** Deletes one session (sign-out, or an expired one found on use). */
export async function deleteDashboardSession(db: Kysely<Database>, idHash: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('id_hash', '=', idHash).execute();
}

/** Deletes every session that expired before `now` (epoch ms). @returns how many. */
export async function pruneDashboardSessions(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('dashboard_sessions').where('expires_at', '<', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * Replaces a user's password hash and deletes its sessions, in one transaction; the session stored under
 * `keepIdHash` (the browser that changed the password) is kept when given.
 * @returns whether the user existed.
 */
export async function setDashboardPassword(
  db: Kysely<Database>,
  input: { id: string; passwordHash: string; keepIdHash?: string },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx
      .updateTable('dashboard_users')
      .set({ password_hash: input.passwordHash })
      .where('id', '=', input.id)
      .executeTakeFirst();
    let sessions = trx.deleteFrom('dashboard_sessions').where('user_id', '=', input.id);
    if (input.keepIdHash !== undefined) sessions = sessions.where('id_hash', '!=', input.keepIdHash);
    await sessions.execute();
    return Number(result.numUpdatedRows) > 0;
  });
}
