import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import type { SignInLimiter } from '../ratelimit/sign-in.ts';
import { decoyHash, hashPassword, MIN_PASSWORD_LENGTH, verifyPassword } from '../security/passwords.ts';
import {
  deleteDashboardSession,
  findDashboardSession,
  findDashboardUserByEmail,
  getDashboardUser,
  insertDashboardSession,
  pruneDashboardSessions,
  setDashboardPassword,
  touchDashboardUser,
} from '../store/dashboard-users.ts';
import type { Store } from '../store/database.ts';
import { getOrganization, type Organization } from '../store/organizations.ts';
import {
  adminCreateUser,
  adminListUsers,
  adminRemoveUser,
  adminSetRole,
  type CreatedUser,
  type UserView,
  userView,
} from './users.ts';

/**
 * How long a dashboard session lasts after sign-in, ms (docs/decisions/0022-dashboard.md: sessions expire): 12 hours.
 */
export const DASHBOARD_SESSION_TTL_MS = 12 * 3_600_000;

/**
 * The one answer to a failed sign-in, whether the e-mail is unknown or the password wrong
 * (docs/decisions/0022-dashboard.md).
 */
export const INVALID_SIGN_IN = 'invalid email or password';
/** The answer to a request without a valid session. */
export const SIGN_IN_REQUIRED = 'sign in to continue';

/** The answer to a password change whose current password is wrong. */
export const WRONG_CURRENT_PASSWORD = 'current password is wrong';

/** Checks a password against a stored PHC hash (Argon2id); injectable so tests can count the checks. */
export type PasswordVerifier = (stored: string, password: string) => Promise<boolean>;

/** A signed-in browser: the session id for the cookie (shown once), its CSRF token and expiry (epoch ms). */
export interface SignedIn {
  sessionId: string;
  csrfToken: string;
  expiresAt: number;
  user: UserView;
}

/** Who a dashboard request comes from: the user, its organization and the session's CSRF token. */
export interface DashboardPrincipal {
  user: UserView;
  org: Organization;
  csrfToken: string;
  expiresAt: number;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * Dashboard users and their sessions (docs/decisions/0022-dashboard.md): sign-in with an Argon2id-hashed password,
 * rate-limited per account and per client address and answered the same for an unknown e-mail and a wrong password;
 * sessions stored by the SHA-256 of their random id, each with its CSRF token, expiring after
 * {@link DASHBOARD_SESSION_TTL_MS}; users of an organization managed by its owners.
 */
export class DashboardAuthService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #limiter: SignInLimiter;
  readonly #ttlMs: number;
  readonly #verify: PasswordVerifier;

  constructor(deps: {
    store: Store;
    clock: Clock;
    limiter: SignInLimiter;
    ttlMs?: number;
    verifyPassword?: PasswordVerifier;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#limiter = deps.limiter;
    this.#ttlMs = deps.ttlMs ?? DASHBOARD_SESSION_TTL_MS;
    this.#verify = deps.verifyPassword ?? verifyPassword;
    // Ready before the first sign-in, so the first unknown e-mail costs one verification like the others.
    void decoyHash();
  }

  /**
   * Signs a user in from client address `address`. The attempt is counted before the password is checked and
   * given back on success ({@link SignInLimiter}: a growing wait per account, a window per address, no lockout).
   * @throws DomainError rate_limited (retryAfter set) while the account's wait or the address's window is not
   *   over; unauthenticated {@link INVALID_SIGN_IN} for an unknown e-mail or a wrong password alike.
   */
  async signIn(input: { email: string; password: string }, address: string): Promise<SignedIn> {
    const email = input.email.trim().toLowerCase();
    const claim = await this.#limiter.claim(email, address);
    if (!claim.allowed)
      throw new DomainError('rate_limited', 'too many sign-in attempts: try again later', {
        retryAfter: claim.retryAfter,
      });
    const db = this.#store.db;
    const user = await findDashboardUserByEmail(db, email);
    // An unknown user costs the same Argon2id verification as a known one.
    const matches = await this.#verify(user?.passwordHash ?? (await decoyHash()), input.password);
    if (!user || !matches) throw new DomainError('unauthenticated', INVALID_SIGN_IN);
    await this.#limiter.succeeded(email, address);
    const now = this.#clock();
    await pruneDashboardSessions(db, now);
    const sessionId = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const expiresAt = now + this.#ttlMs;
    const at = new Date(now).toISOString();
    await insertDashboardSession(db, {
      idHash: sha256(sessionId),
      userId: user.id,
      csrfToken,
      createdAt: at,
      expiresAt,
    });
    await touchDashboardUser(db, user.id, at);
    return { sessionId, csrfToken, expiresAt, user: userView({ ...user, lastSignInAt: at }) };
  }

  /**
   * The principal of session id `sessionId` (the cookie's value).
   * @throws DomainError unauthenticated {@link SIGN_IN_REQUIRED} when it is missing, unknown or expired (an
   *   expired session is deleted), or its user or organization is gone.
   */
  async authenticate(sessionId: string | undefined): Promise<DashboardPrincipal> {
    const refused = new DomainError('unauthenticated', SIGN_IN_REQUIRED);
    if (!sessionId || sessionId.length > 100) throw refused;
    const db = this.#store.db;
    const idHash = sha256(sessionId);
    const session = await findDashboardSession(db, idHash);
    if (!session) throw refused;
    if (session.expiresAt <= this.#clock()) {
      await deleteDashboardSession(db, idHash);
      throw refused;
    }
    const user = await getDashboardUser(db, session.userId);
    const org = user ? await getOrganization(db, user.orgId) : undefined;
    if (!user || !org) throw refused;
    return { user: userView(user), org, csrfToken: session.csrfToken, expiresAt: session.expiresAt };
  }

  /** Whether `given` equals the session's CSRF token (constant-time). */
  csrfMatches(principal: DashboardPrincipal, given: string | undefined): boolean {
    if (given === undefined) return false;
    const a = Buffer.from(principal.csrfToken);
    const b = Buffer.from(given);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** Ends a session (sign-out); an unknown id is ignored. */
  async signOut(sessionId: string | undefined): Promise<void> {
    if (sessionId) await deleteDashboardSession(this.#store.db, sha256(sessionId));
  }

  /**
   * Changes the signed-in user's password (docs/dashboard.md "Your password"): the current one must match, the
   * new one is at least {@link MIN_PASSWORD_LENGTH} characters; every other session of the user is signed out,
   * the one that asked (`sessionId`, the cookie's value) stays. Checks of the current password go through the
   * sign-in limiter like sign-ins (keyed by the user's e-mail and `address`).
   * @throws DomainError invalid {@link WRONG_CURRENT_PASSWORD} or a too short new password; rate_limited while
   *   the account's wait is not over.
   */
  async changePassword(
    principal: DashboardPrincipal,
    sessionId: string,
    input: { currentPassword: string; newPassword: string },
    address: string,
  ): Promise<void> {
    if (input.newPassword.length < MIN_PASSWORD_LENGTH)
      throw new DomainError('invalid', `newPassword must be at least ${MIN_PASSWORD_LENGTH} characters`);
    const email = principal.user.email;
    const claim = await this.#limiter.claim(email, address);
    if (!claim.allowed)
      throw new DomainError('rate_limited', 'too many password attempts: try again later', {
        retryAfter: claim.retryAfter,
      });
    const db = this.#store.db;
    const user = await getDashboardUser(db, principal.user.id);
    if (!user || !(await this.#verify(user.passwordHash, input.currentPassword)))
      throw new DomainError('invalid', WRONG_CURRENT_PASSWORD);
    await this.#limiter.succeeded(email, address);
    await setDashboardPassword(db, {
      id: user.id,
      passwordHash: await hashPassword(input.newPassword),
      keepIdHash: sha256(sessionId),
    });
  }

  /** Users of the organization. */
  listUsers(orgId: string): Promise<UserView[]> {
    return adminListUsers(this.#store.db, orgId);
  }

  /**
   * Adds a user to the organization; the password is generated (and returned once) when not given.
   * @throws DomainError invalid (e-mail, role, password), conflict (e-mail taken).
   */
  createUser(orgId: string, input: { email: string; role: string; password?: string }): Promise<CreatedUser> {
    return adminCreateUser(this.#store.db, { org: orgId, ...input }, this.#clock());
  }

  /** Removes a user of the organization. @throws DomainError not_found; conflict for the last owner. */
  removeUser(orgId: string, id: string): Promise<UserView> {
    return adminRemoveUser(this.#store.db, id, orgId);
  }

  /** Changes a user's role. @throws DomainError not_found; invalid role; conflict for the last owner. */
  setRole(orgId: string, id: string, role: string): Promise<UserView> {
    return adminSetRole(this.#store.db, { id, role, orgId });
  }
}
