import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.ts';
import { generatePassword, hashPassword, MIN_PASSWORD_LENGTH } from '../security/passwords.ts';
import {
  countOwners,
  DASHBOARD_ROLES,
  type DashboardRole,
  type DashboardUser,
  deleteDashboardUser,
  findDashboardUserByEmail,
  getDashboardUser,
  insertDashboardUser,
  listDashboardUsers,
  setDashboardPassword,
  updateDashboardRole,
  withOrganizationLocked,
} from '../store/dashboard-users.ts';
import { findOrganization } from '../store/organizations.ts';
import type { Database } from '../store/schema.ts';

/** A dashboard user as shown to admins (CLI, dashboard users page): never its password hash. */
export interface UserView {
  id: string;
  orgId: string;
  email: string;
  role: DashboardRole;
  createdAt: string;
  lastSignInAt: string | null;
}

/** The public fields of a user. */
export function userView(user: DashboardUser): UserView {
  const { passwordHash: _hash, ...view } = user;
  return view;
}

/** A created user and its password: generated ones are shown this once and never stored (only the hash is). */
export interface CreatedUser {
  user: UserView;
  password: string;
  /** Whether the password was generated (then it must be shown to the operator). */
  generated: boolean;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

/**
 * Checks and normalises an e-mail address (trimmed, lowercased). @throws DomainError invalid `email must be an e-mail
 * address such as ana@example.com`.
 */
export function parseEmail(email: string): string {
  const normalised = email.trim().toLowerCase();
  if (!EMAIL.test(normalised))
    throw errors.badRequest('email must be an e-mail address such as ana@example.com');
  return normalised;
}

/** Checks a role name. @throws DomainError invalid `role must be one of owner, member, viewer`. */
export function parseRole(role: string): DashboardRole {
  if (!DASHBOARD_ROLES.includes(role as DashboardRole))
    throw errors.badRequest(`role must be one of ${DASHBOARD_ROLES.join(', ')}`);
  return role as DashboardRole;
}

/**
 * Creates a dashboard user of organization `org` (id or name) with an Argon2id password hash
 * (docs/decisions/0022-dashboard.md): the given password (at least {@link MIN_PASSWORD_LENGTH} characters) or a
 * generated one.
 * @throws DomainError not_found for an unknown organization; invalid for a bad e-mail, role or password; conflict
 *   for an e-mail already in use.
 */
export async function adminCreateUser(
  db: Kysely<Database>,
  input: { org: string; email: string; role: string; password?: string },
  now: number = Date.now(),
): Promise<CreatedUser> {
  const org = await findOrganization(db, input.org);
  if (!org) throw errors.notFound(`organization "${input.org}" not found`);
  const email = parseEmail(input.email);
  const role = parseRole(input.role);
  if (input.password !== undefined && input.password.length < MIN_PASSWORD_LENGTH)
    throw errors.badRequest(`password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  if (await findDashboardUserByEmail(db, email)) throw errors.conflict(`user ${email} already exists`);
  const password = input.password ?? generatePassword();
  const passwordHash = await hashPassword(password);
  let user: DashboardUser;
  try {
    user = await insertDashboardUser(db, {
      orgId: org.id,
      email,
      role,
      passwordHash,
      createdAt: new Date(now).toISOString(),
    });
  } catch (error) {
    // Added meanwhile by a concurrent request: the e-mail's unique index refused this one.
    if (await findDashboardUserByEmail(db, email)) throw errors.conflict(`user ${email} already exists`);
    throw error;
  }
  return { user: userView(user), password, generated: input.password === undefined };
}

/** Users of an organization (id or name), or of every organization. @throws DomainError not_found for an unknown organization. */
export async function adminListUsers(db: Kysely<Database>, org?: string): Promise<UserView[]> {
  if (org === undefined) return (await listDashboardUsers(db)).map(userView);
  const found = await findOrganization(db, org);
  if (!found) throw errors.notFound(`organization "${org}" not found`);
  return (await listDashboardUsers(db, found.id)).map(userView);
}

/**
 * Removes a user (by id or e-mail) and signs out its sessions. `orgId` restricts it to one organization (the
 * dashboard); the last owner of an organization cannot be removed.
 * @throws DomainError not_found `user X not found`; conflict `cannot remove the last owner of the organization`.
 */
export async function adminRemoveUser(
  db: Kysely<Database>,
  idOrEmail: string,
  orgId?: string,
): Promise<UserView> {
  const found = await findUser(db, idOrEmail);
  if (!found || (orgId !== undefined && found.orgId !== orgId))
    throw errors.notFound(`user ${idOrEmail} not found`);
  // Counted and removed under the organization's lock: two owners removing each other at once leave one.
  return withOrganizationLocked(db, found.orgId, async (trx) => {
    const user = await getDashboardUser(trx, found.id);
    if (!user) throw errors.notFound(`user ${idOrEmail} not found`);
    if (user.role === 'owner' && (await countOwners(trx, user.orgId)) <= 1)
      throw errors.conflict('cannot remove the last owner of the organization');
    await deleteDashboardUser(trx, user.id);
    return userView(user);
  });
}

/**
 * Changes a user's role within organization `orgId`; the last owner cannot be demoted.
 * @throws DomainError not_found `user X not found`; conflict `cannot demote the last owner of the organization`;
 *   invalid for a bad role.
 */
export async function adminSetRole(
  db: Kysely<Database>,
  input: { id: string; role: string; orgId: string },
): Promise<UserView> {
  const role = parseRole(input.role);
  // Counted and changed under the organization's lock: two owners demoting each other at once leave one.
  return withOrganizationLocked(db, input.orgId, async (trx) => {
    const user = await getDashboardUser(trx, input.id);
    if (!user || user.orgId !== input.orgId) throw errors.notFound(`user ${input.id} not found`);
    if (user.role === 'owner' && role !== 'owner' && (await countOwners(trx, user.orgId)) <= 1)
      throw errors.conflict('cannot demote the last owner of the organization');
    await updateDashboardRole(trx, user.id, role);
    return userView({ ...user, role });
  });
}

/**
 * Gives a user (by id or e-mail) a new password and signs out all its sessions (`parley user reset-password`,
 * docs/cli.md): the given password (at least {@link MIN_PASSWORD_LENGTH} characters) or a generated one, returned
 * once; only its Argon2id hash is stored.
 * @throws DomainError not_found `user X not found`; invalid for a password too short.
 */
export async function adminResetPassword(
  db: Kysely<Database>,
  input: { user: string; password?: string },
): Promise<CreatedUser> {
  if (input.password !== undefined && input.password.length < MIN_PASSWORD_LENGTH)
    throw errors.badRequest(`password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  const user = await findUser(db, input.user);
  if (!user) throw errors.notFound(`user ${input.user} not found`);
  const password = input.password ?? generatePassword();
  await setDashboardPassword(db, { id: user.id, passwordHash: await hashPassword(password) });
  return { user: userView(user), password, generated: input.password === undefined };
}

async function findUser(db: Kysely<Database>, idOrEmail: string): Promise<DashboardUser | undefined> {
  if (idOrEmail.includes('@')) return findDashboardUserByEmail(db, idOrEmail.trim().toLowerCase());
  return getDashboardUser(db, idOrEmail);
}
