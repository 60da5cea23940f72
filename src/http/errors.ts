import type { DomainErrorCode } from '../domain/errors.ts';

/**
 * The codes of errors only the HTTP layer raises (Node's parser, Fastify's router and content-type parser): they
 * have no meaning below HTTP.
 */
export type HttpOnlyErrorCode =
  | 'request_timeout'
  | 'uri_too_long'
  | 'headers_too_large'
  | 'unsupported_media_type';

/** Every code an error response can come from: the domain's and the HTTP layer's own. */
export type ErrorCode = DomainErrorCode | HttpOnlyErrorCode;

/**
 * The HTTP status of each error code (docs/decisions/0001-envelope-and-error-codes.md, docs/api.md#errors);
 * exhaustive, so a new code cannot be added without its status. The only place a domain error meets an HTTP status.
 */
export function statusOf(code: ErrorCode): number {
  switch (code) {
    case 'invalid':
      return 400;
    case 'unauthenticated':
      return 401;
    case 'forbidden':
      return 403;
    case 'not_found':
      return 404;
    case 'request_timeout':
      return 408;
    case 'gone':
      return 410;
    case 'conflict':
    case 'not_logged_in':
    case 'not_connected':
      return 409;
    case 'too_large':
      return 413;
    case 'uri_too_long':
      return 414;
    case 'unsupported_media_type':
      return 415;
    case 'not_registered':
    case 'not_participant':
    case 'mismatch':
      return 422;
    case 'rate_limited':
      return 429;
    case 'headers_too_large':
      return 431;
    case 'internal':
      return 500;
    case 'platform_refused':
      return 502;
    case 'platform_unreachable':
    case 'not_ready':
    case 'store_unavailable':
      return 503;
    case 'timeout':
      return 504;
    default: {
      const unreachable: never = code;
      throw new Error(`unknown error code ${String(unreachable)}`);
    }
  }
}
