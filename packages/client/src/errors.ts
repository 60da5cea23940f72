/**
 * What a failed call raises. parley answers every error with one envelope, `{ error: { code, message } }`, where
 * `code` is the HTTP status and `message` names the field and the rule (docs/api.md "Errors",
 * docs/decisions/0001-envelope-and-error-codes.md). The client turns it into a {@link ParleyError}; a call that got
 * no answer at all (the connection failed on every attempt) raises a {@link ParleyNetworkError}.
 */

/**
 * The kind of error, named after parley's error codes (docs/decisions/0001-envelope-and-error-codes.md). The wire
 * carries only the HTTP status, so statuses that several server codes share get one name here: 409 `conflict` (also
 * "instance is not logged in" / "not connected" and "a request with this Idempotency-Key is in progress"), 422
 * `unprocessable` (an unregistered recipient, a non-participant, an `Idempotency-Key` reused with another request),
 * 503 `unavailable` (the platform, the store or a converter cannot be reached, or the node is stopping).
 * `unexpected` is a status parley does not answer (a proxy's page, say).
 */
export type ParleyErrorCode =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'request_timeout'
  | 'conflict'
  | 'gone'
  | 'too_large'
  | 'uri_too_long'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'rate_limited'
  | 'headers_too_large'
  | 'internal'
  | 'platform_refused'
  | 'unavailable'
  | 'timeout'
  | 'unexpected';

/** Each status parley answers errors with, and its {@link ParleyErrorCode} (docs/api.md "Errors"). */
const CODES: Readonly<Record<number, ParleyErrorCode>> = {
  400: 'invalid',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  408: 'request_timeout',
  409: 'conflict',
  410: 'gone',
  413: 'too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  422: 'unprocessable',
  429: 'rate_limited',
  431: 'headers_too_large',
  500: 'internal',
  502: 'platform_refused',
  503: 'unavailable',
  504: 'timeout',
};

/**
 * The {@link ParleyErrorCode} of an HTTP status: parley's name for it, or `unexpected` for a status parley never
 * answers.
 */
export function errorCodeOf(status: number): ParleyErrorCode {
  return CODES[status] ?? 'unexpected';
}

/** What identifies the call an error belongs to. */
export interface CallInfo {
  /** The HTTP method, upper case (`POST`). */
  method: string;
  /** The path requested, with its query (`/v1/messages/send`). */
  path: string;
  /** How many HTTP attempts were made, retries included (at least 1). */
  attempts: number;
  /**
   * The `Idempotency-Key` the call's attempts carried (POSTs only, docs/decisions/0010-idempotency.md): pass it again
   * as `idempotencyKey` to retry the same operation safely, e.g. after a 409 "a request with this Idempotency-Key is
   * in progress".
   */
  idempotencyKey: string | undefined;
}

/**
 * An error answer of parley: the HTTP status, parley's code and message exactly as sent, and when to retry.
 * Raised by every call of the client for any status outside 2xx, after the retries of 429 and 503 are spent
 * (docs/decisions/0032-client-library.md).
 */
export class ParleyError extends Error {
  override name = 'ParleyError';
  /** The HTTP status (the envelope's `error.code`), e.g. 422. */
  readonly status: number;
  /** parley's name for the status, e.g. `unprocessable` (see {@link ParleyErrorCode}). */
  readonly code: ParleyErrorCode;
  /**
   * Whole seconds to wait before retrying, from the `Retry-After` header (or the envelope's `retryAfter`): set on 429
   * and on a 503 of an unavailable store (docs/api.md "Rate limits", "Errors").
   */
  readonly retryAfter: number | undefined;
  /** The answer's `x-request-id`: the server's log lines of the request carry it. */
  readonly requestId: string | undefined;
  /** The HTTP method, upper case. */
  readonly method: string;
  /** The path requested, with its query. */
  readonly path: string;
  /** How many attempts were made (retries included). */
  readonly attempts: number;
  /** The `Idempotency-Key` of the call (POSTs), to retry it safely; undefined for other methods. */
  readonly idempotencyKey: string | undefined;

  /**
   * @param status the HTTP status.
   * @param message parley's message (the envelope's `error.message`), or a description of a non-parley answer.
   * @param details when to retry, the request id and the call.
   */
  constructor(
    status: number,
    message: string,
    details: CallInfo & { retryAfter?: number | undefined; requestId?: string | undefined },
  ) {
    super(message);
    this.status = status;
    this.code = errorCodeOf(status);
    this.retryAfter = details.retryAfter;
    this.requestId = details.requestId;
    this.method = details.method;
    this.path = details.path;
    this.attempts = details.attempts;
    this.idempotencyKey = details.idempotencyKey;
  }
}

/**
 * A DELETE that may have been carried out though its last answer is 404: an earlier attempt of the call got no answer
 * (the connection failed, or `timeoutMs` passed, after the request went out) and a retry found nothing to delete.
 * parley keeps answers for an `Idempotency-Key` on POSTs only (docs/api.md "Idempotency"), so the retry cannot be
 * answered with the lost attempt's answer: that attempt most likely deleted it, but another client may have, or it
 * may never have existed. Either way it is gone now. A {@link ParleyError} with parley's 404 (`status`, `code`
 * `not_found` and `message` as sent), so code that treats a 404 of a DELETE as done keeps working
 * (docs/decisions/0092-client-retries-of-patch-and-delete.md).
 */
export class ParleyOutcomeUnknownError extends ParleyError {
  override name = 'ParleyOutcomeUnknownError';
  /** How many attempts of the call got no answer before the 404 (at least 1); any of them may have deleted it. */
  readonly unansweredAttempts: number;

  /**
   * @param notFound the 404 the retry got, as the client raised it.
   * @param unansweredAttempts how many earlier attempts got no answer.
   */
  constructor(notFound: ParleyError, unansweredAttempts: number) {
    super(notFound.status, notFound.message, notFound);
    this.unansweredAttempts = unansweredAttempts;
  }
}

/**
 * No answer from parley: every attempt failed before a response arrived (connection refused or reset, DNS, TLS, or
 * the per-attempt `timeoutMs` passed). `cause` is the last failure. A POST may still have been carried out; retry it
 * with the same {@link ParleyNetworkError.idempotencyKey} and parley answers the first outcome instead of acting
 * twice (docs/decisions/0010-idempotency.md).
 */
export class ParleyNetworkError extends Error {
  override name = 'ParleyNetworkError';
  /** The HTTP method, upper case. */
  readonly method: string;
  /** The path requested, with its query. */
  readonly path: string;
  /** How many attempts were made. */
  readonly attempts: number;
  /** The `Idempotency-Key` of the call (POSTs), to retry it safely; undefined for other methods. */
  readonly idempotencyKey: string | undefined;

  /**
   * @param info the call.
   * @param cause the last attempt's failure (what `fetch` threw).
   */
  constructor(info: CallInfo, cause: unknown) {
    super(
      `${info.method} ${info.path}: no answer from parley after ${info.attempts} attempt(s): ${describe(cause)}`,
      { cause },
    );
    this.method = info.method;
    this.path = info.path;
    this.attempts = info.attempts;
    this.idempotencyKey = info.idempotencyKey;
  }
}

/** A failure's message, with its cause's when `fetch` wrapped one (Node's `fetch failed`). */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
