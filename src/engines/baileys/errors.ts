import { DomainError } from '../../domain/errors.ts';

/** The shape of a `@hapi/boom` error as Baileys throws it (duck-typed: parley does not import Boom). */
export interface BoomLike {
  isBoom: true;
  message: string;
  output: { statusCode: number };
  data?: unknown;
}

/** True for Baileys' `Boom` errors. */
export function isBoom(error: unknown): error is BoomLike {
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as { isBoom?: unknown; output?: { statusCode?: unknown } };
  return candidate.isBoom === true && typeof candidate.output?.statusCode === 'number';
}

/** Baileys' `DisconnectReason.connectionLost`: the close code of a connection taken for dead. */
export const CONNECTION_LOST = 408;

/**
 * The error a socket is ended with when parley takes its connection for dead (a relayed message never acknowledged,
 * ack-wait.ts): shaped as Baileys' keep-alive ends a silent connection (`Boom('Connection was lost', 408)`), so the
 * close policy reconnects at once (close-policy.ts: 408 reconnects).
 */
export function connectionLost(message: string): Error & BoomLike {
  return Object.assign(new Error(message), {
    isBoom: true as const,
    output: { statusCode: CONNECTION_LOST },
  });
}

/**
 * Where a Boom's number comes from: `iq` means the platform answered a query with `<error code text>`
 * (Baileys' `assertNodeErrorFree` puts the code in `data`, `extractGroupMetadata` in the status with the error node
 * in `data`); `transport` means the socket failed (Baileys' `DisconnectReason`: 408 timed out, 428 closed, …).
 */
export interface PlatformFailure {
  origin: 'iq' | 'transport';
  code: number;
  text: string;
}

/** Reads a Boom into a {@link PlatformFailure}; undefined for anything else. */
export function platformFailure(error: unknown): PlatformFailure | undefined {
  if (!isBoom(error)) return undefined;
  const { data } = error;
  if (typeof data === 'number' && Number.isFinite(data))
    return { origin: 'iq', code: data, text: error.message };
  if (typeof data === 'object' && data !== null && (data as { tag?: unknown }).tag === 'error') {
    return { origin: 'iq', code: error.output.statusCode, text: error.message };
  }
  return { origin: 'transport', code: error.output.statusCode, text: error.message };
}

/** Seconds a client is told to wait after the platform's `429 rate-overlimit` (the platform gives no figure). */
export const PLATFORM_RATE_RETRY_SECONDS = 60;
/** Seconds to wait after a 463 reach-out timelock whose end the platform did not state. */
export const REACHOUT_RETRY_SECONDS = 3_600;

/**
 * The platform's `429 rate-overlimit` on a query (docs/decisions/0025-live-engine.md): its own 429 message, distinct
 * from parley's quota.
 */
export function platformRateLimited(): DomainError {
  return new DomainError(
    'rate_limited',
    'the platform rate-limited this account (429 rate-overlimit): slow down and retry later',
    { retryAfter: PLATFORM_RATE_RETRY_SECONDS, restriction: 'rate-overlimit' },
  );
}

/**
 * The platform's 463 reach-out timelock (docs/decisions/0025-live-engine.md; Baileys
 * `NACK_REASONS.SenderReachoutTimelocked`): the account may not start new chats until `endsAt` (existing chats still
 * work). 429 with `retryAfter` = whole seconds until the end (≥ 1), or {@link REACHOUT_RETRY_SECONDS} when unknown.
 */
export function reachoutLocked(endsAt: Date | undefined, now: number): DomainError {
  const until = endsAt ? ` until ${endsAt.toISOString()}` : '';
  const retryAfter = endsAt
    ? Math.max(1, Math.ceil((endsAt.getTime() - now) / 1000))
    : REACHOUT_RETRY_SECONDS;
  return new DomainError(
    'rate_limited',
    `the platform restricts this account from messaging new contacts (463 reach-out timelock)${until}; existing chats still work`,
    { retryAfter, restriction: 'reach-out-timelock' },
  );
}

/** Context for {@link toDomainError}: what a 404 or a 401/403 answer means for this operation. */
export interface ErrorContext {
  /** Message of the not_found raised for `404 item-not-found` (and 401/403/406 when `forbidden` is not set). */
  notFound?: string;
  /** Message of the forbidden raised for `401 not-authorized` / `403 forbidden`. */
  forbidden?: string;
  /** Epoch ms, for retry-after computations. */
  now?: number;
}

/**
 * Maps what a Baileys call threw to parley's errors (docs/decisions/0001-envelope-and-error-codes.md): `DomainError`s
 * pass through; platform answers become 429 (rate-overlimit, 463), 404/403 (per `context`) or 502 `platform_refused`
 * carrying the platform's reason; transport failures (socket closed or timed out) become 503 `platform_unreachable`.
 * Anything else (a bug, not a platform answer) is returned unchanged so the error handler answers 500.
 */
export function toDomainError(error: unknown, context: ErrorContext = {}): unknown {
  if (error instanceof DomainError) return error;
  const failure = platformFailure(error);
  if (!failure) return error;
  const { code, text } = failure;
  if (failure.origin === 'iq' || code === 429 || code === 463) {
    if (code === 429 || /rate-overlimit/i.test(text)) return platformRateLimited();
    if (code === 463) return reachoutLocked(undefined, context.now ?? Date.now());
    if ((code === 401 || code === 403) && context.forbidden) {
      return new DomainError('forbidden', context.forbidden, { cause: error });
    }
    if ((code === 404 || code === 401 || code === 403 || code === 406) && context.notFound) {
      return new DomainError('not_found', context.notFound, { cause: error });
    }
    return new DomainError('platform_refused', `the platform refused the request (${code} ${text})`, {
      cause: error,
    });
  }
  if (code === 408 || code === 428 || code === 503 || code === 515) {
    return new DomainError('platform_unreachable', `lost the connection to the platform (${code} ${text})`, {
      cause: error,
    });
  }
  return new DomainError('platform_refused', `the platform failed the request (${code} ${text})`, {
    cause: error,
  });
}

/** Runs `operation` and rethrows its failure through {@link toDomainError}. */
export async function mapPlatformErrors<T>(
  operation: () => Promise<T>,
  context: ErrorContext = {},
): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw toDomainError(error, context);
  }
}
