/**
 * What went wrong, in the domain's words (docs/decisions/0001-envelope-and-error-codes.md): every layer below HTTP
 * raises a {@link DomainError} with one of these codes, and only `src/http` decides the HTTP status of each (one
 * exhaustive switch in src/http/errors.ts). Adding a code fails type-checking until the HTTP layer maps it.
 * - `invalid`: the input breaks a rule (the message names the field and the rule).
 * - `unauthenticated`: no valid API key; `forbidden`: the key or the account may not do this.
 * - `not_found`: the thing named does not exist or is not addressable.
 * - `gone`: the thing named existed but is no longer available (a platform media file past its expiry).
 * - `conflict`: the current state forbids the operation (e.g. `already logged in`).
 * - `mismatch`: the request claims to repeat an earlier one but differs from it (an `Idempotency-Key` reused with
 *   another method, path or body, docs/decisions/0010-idempotency.md).
 * - `not_logged_in`: the instance has no login yet; `not_connected`: logged in but not connected.
 * - `too_large`: a body or media file passes its size limit.
 * - `not_registered`: a phone number the operation needs is not on the platform.
 * - `not_participant`: a user the operation needs is not a member of the chat or group.
 * - `rate_limited`: a plan or platform limit; `retryAfter` says when to retry.
 * - `platform_refused`: the platform answered with an error; `platform_unreachable`: it could not be reached.
 * - `not_ready`: a dependency of this process (store, converter) is not available, or it is shutting down.
 * - `store_unavailable`: the store (PostgreSQL or SQLite) cannot be reached or cannot work right now (connection
 *   refused or cut, database restarting, SQLite busy or failing I/O); the same request may succeed shortly
 *   (docs/decisions/0011-store-faults.md). `retryAfter` says when to try again.
 * - `timeout`: an operation did not finish in its time limit (e.g. login verification).
 * - `internal`: a bug; its text is logged, never sent.
 */
export type DomainErrorCode =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'gone'
  | 'conflict'
  | 'mismatch'
  | 'not_logged_in'
  | 'not_connected'
  | 'too_large'
  | 'not_registered'
  | 'not_participant'
  | 'rate_limited'
  | 'platform_refused'
  | 'platform_unreachable'
  | 'not_ready'
  | 'store_unavailable'
  | 'timeout'
  | 'internal';

/** A restriction signal of the platform (its nacks 429 rate-overlimit and 463 reach-out timelock). */
export type PlatformRestriction = 'rate-overlimit' | 'reach-out-timelock';

/**
 * An error parley raises on purpose. The message is user-facing (it names the field, the rule or the state) except
 * for `internal`. `retryAfter` (whole seconds) is set for `rate_limited` (answered in the body and the
 * `Retry-After` header, docs/api.md Errors) and `store_unavailable` (the header only).
 */
export class DomainError extends Error {
  override name = 'DomainError';
  readonly code: DomainErrorCode;
  readonly retryAfter: number | undefined;
  /**
   * The platform's restriction signal behind a `rate_limited` error, when it was one: `rate-overlimit` (the
   * account sends too fast: every send waits) or `reach-out-timelock` (no new chats until the end; existing chats
   * still work). Read by the send queue (docs/decisions/0013-pacing.md).
   */
  readonly restriction: PlatformRestriction | undefined;

  constructor(
    code: DomainErrorCode,
    message: string,
    options?: { retryAfter?: number; cause?: unknown; restriction?: PlatformRestriction },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfter = options?.retryAfter;
    this.restriction = options?.restriction;
  }
}

/**
 * Raised instead of writing for a session that was released (its instance's lease lost, handed over or about to
 * expire, or the instance deleted, docs/decisions/0008-leases-and-fencing.md), or whose key write found its lease
 * taken by another node (src/store/engine-auth.ts): a late write of its Signal keys or engine state would overwrite
 * what the instance's new owner wrote meanwhile. A request whose operation ran into it is answered `503`
 * (`not_ready`): asked again, it reaches the instance's new owner, or finds the instance gone (`404`).
 */
export class SessionReleasedError extends DomainError {
  constructor() {
    super('not_ready', "the instance's session was closed on this node (it moved, or was deleted); retry");
    this.name = 'SessionReleasedError';
  }
}

/**
 * A connect that found the instance's one-socket lock held by another process (`instance_locks`,
 * docs/decisions/0025-live-engine.md): `409` `instance is connected by another parley process (<holder>); its lock
 * expires at <time>`. A boot restore on one node tries again after it: the holder may be a process that was killed,
 * whose lock nobody releases before it expires (docs/decisions/0117-boot-restores-wait-out-a-dead-process-lock.md).
 */
export class SessionLockHeldError extends DomainError {
  /** @param holder the lock's owner (a process's node id); `expiresAt` its expiry, RFC 3339. */
  constructor(holder: string, expiresAt: string) {
    super(
      'conflict',
      `instance is connected by another parley process (${holder}); its lock expires at ${expiresAt}`,
    );
    this.name = 'SessionLockHeldError';
  }
}

/**
 * The one message every authentication failure answers with (docs/decisions/0020-security-promises.md: it does not
 * reveal which).
 */
export const INVALID_API_KEY = 'invalid API key';

/** What a request that needs an unreachable store is answered (docs/api.md, Errors). */
export const STORE_UNAVAILABLE = 'the store is unavailable right now; retry shortly';

/**
 * `Retry-After` of a `store_unavailable` answer, seconds: about how long a PostgreSQL restart or failover keeps
 * connections refused (docs/deploy.md, What a database restart does).
 */
export const STORE_RETRY_AFTER_S = 5;

/**
 * Shorthands for the errors raised in many places; messages follow docs/decisions/0001-envelope-and-error-codes.md.
 */
export const errors = {
  badRequest: (message: string) => new DomainError('invalid', message),
  invalidKey: () => new DomainError('unauthenticated', INVALID_API_KEY),
  missingScope: (scope: string) => new DomainError('forbidden', `API key lacks required scope ${scope}`),
  instanceNotFound: () => new DomainError('not_found', 'instance not found'),
  notFound: (message: string) => new DomainError('not_found', message),
  conflict: (message: string) => new DomainError('conflict', message),
  notLoggedIn: () => new DomainError('not_logged_in', 'instance is not logged in'),
  notConnected: () => new DomainError('not_connected', 'instance is not connected'),
  alreadyLoggedIn: () => new DomainError('conflict', 'already logged in'),
  /**
   * A reply's `id` names a message parley stored in another chat than the send's: its quote would show that chat's
   * words as said in this one (docs/decisions/0017-messages-and-media.md).
   */
  quotedElsewhere: () => new DomainError('invalid', 'id must name a message in this chat'),
  /** The store cannot be reached now; `cause` is the driver's error (logged, never sent). */
  storeUnavailable: (cause?: unknown) =>
    new DomainError('store_unavailable', STORE_UNAVAILABLE, {
      retryAfter: STORE_RETRY_AFTER_S,
      ...(cause === undefined ? {} : { cause }),
    }),
};
