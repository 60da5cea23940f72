/**
 * The closed set of error codes parley answers with, one HTTP status each (DESIGN D6). `REQUEST_TIMEOUT`,
 * `URI_TOO_LONG` and `HEADERS_TOO_LARGE` come from the HTTP layer (Node's parser, Fastify's router), not routes.
 * Every error response is `{ error: { code: <status>, message, retryAfter? } }` (SPEC Errors).
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'REQUEST_TIMEOUT'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'URI_TOO_LONG'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'UNPROCESSABLE'
  | 'RATE_LIMITED'
  | 'HEADERS_TOO_LARGE'
  | 'INTERNAL'
  | 'PLATFORM_ERROR'
  | 'PLATFORM_UNAVAILABLE'
  | 'NOT_READY'
  | 'LOGIN_TIMEOUT';

/** HTTP status of each {@link ErrorCode}; exhaustive, so a new code cannot be added without its status. */
export function statusOf(code: ErrorCode): number {
  switch (code) {
    case 'BAD_REQUEST':
      return 400;
    case 'REQUEST_TIMEOUT':
      return 408;
    case 'UNAUTHORIZED':
      return 401;
    case 'FORBIDDEN':
      return 403;
    case 'NOT_FOUND':
      return 404;
    case 'CONFLICT':
      return 409;
    case 'PAYLOAD_TOO_LARGE':
      return 413;
    case 'URI_TOO_LONG':
      return 414;
    case 'UNSUPPORTED_MEDIA_TYPE':
      return 415;
    case 'UNPROCESSABLE':
      return 422;
    case 'RATE_LIMITED':
      return 429;
    case 'HEADERS_TOO_LARGE':
      return 431;
    case 'INTERNAL':
      return 500;
    case 'PLATFORM_ERROR':
      return 502;
    case 'PLATFORM_UNAVAILABLE':
    case 'NOT_READY':
      return 503;
    case 'LOGIN_TIMEOUT':
      return 504;
    default: {
      const unreachable: never = code;
      throw new Error(`unknown error code ${String(unreachable)}`);
    }
  }
}

/**
 * An error parley raises on purpose; the error handler turns it into the envelope with its status.
 * `retryAfter` (whole seconds) is only set for `RATE_LIMITED` (SPEC Errors, DESIGN D13).
 */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: ErrorCode;
  readonly retryAfter: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { retryAfter?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfter = options?.retryAfter;
  }

  get status(): number {
    return statusOf(this.code);
  }
}

/** The one message every authentication failure answers with (DESIGN D11: it does not reveal which). */
export const INVALID_API_KEY = 'invalid API key';

/** Shorthands for the errors raised in many places; messages follow DESIGN D4–D7. */
export const errors = {
  badRequest: (message: string) => new ApiError('BAD_REQUEST', message),
  invalidKey: () => new ApiError('UNAUTHORIZED', INVALID_API_KEY),
  missingScope: (scope: string) => new ApiError('FORBIDDEN', `API key lacks required scope ${scope}`),
  instanceNotFound: () => new ApiError('NOT_FOUND', 'instance not found'),
  notFound: (message: string) => new ApiError('NOT_FOUND', message),
  conflict: (message: string) => new ApiError('CONFLICT', message),
  notLoggedIn: () => new ApiError('CONFLICT', 'instance is not logged in'),
  notConnected: () => new ApiError('CONFLICT', 'instance is not connected'),
  alreadyLoggedIn: () => new ApiError('CONFLICT', 'already logged in'),
};
