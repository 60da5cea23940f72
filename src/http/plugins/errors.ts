import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { DomainError, type DomainErrorCode } from '../../domain/errors.ts';
import { type ErrorCode, statusOf } from '../errors.ts';
import { type ValidationIssue, validationMessage } from '../validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The domain error code the error handler answered the request with (`internal` for an unexpected error), null
     * when it answered none: what the idempotency plugin needs to tell a 5xx that decided an operation's failure from
     * one that left it going on (src/app/idempotency.ts).
     */
    failureCode: DomainErrorCode | null;
  }
}

/** The error envelope body (docs/api.md#errors). */
export function errorBody(status: number, message: string, retryAfter?: number) {
  return { error: { code: status, message, ...(retryAfter === undefined ? {} : { retryAfter }) } };
}

/**
 * The route's body limit in words (`1 MB`, `22 MB`), naming the limit as
 * docs/decisions/0001-envelope-and-error-codes.md asks for 413s.
 */
function bodyLimitText(request: FastifyRequest): string {
  const bytes = request.routeOptions.bodyLimit ?? 0;
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}

/** The 404 message: the method and path (never the query, which may carry secrets). */
function notFoundMessage(request: FastifyRequest): string {
  return `route ${request.method} ${request.url.split('?')[0]} not found`;
}

/** Fastify's own client errors, mapped to our codes and messages. */
function fastifyClientError(
  error: FastifyError,
  request: FastifyRequest,
): { code: ErrorCode; message: string } | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: 'invalid', message: 'request body is not valid JSON' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'too_large', message: `request body must be at most ${bodyLimitText(request)}` };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'unsupported_media_type', message: 'Content-Type must be application/json' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'invalid', message: 'Content-Length does not match the body' };
    default:
      if (error.statusCode === 400 && typeof error.message === 'string' && error.message.includes('JSON')) {
        return { code: 'invalid', message: 'request body is not valid JSON' };
      }
      return undefined;
  }
}

/** True when the client of `request` went away before its answer: the request aborted or its socket destroyed. */
function clientLeft(request: FastifyRequest): boolean {
  return request.raw.aborted || request.raw.socket?.destroyed === true;
}

/**
 * The one error handler (Unkey's three tiers): our `DomainError`s with the status {@link statusOf} maps their code
 * to (a 5xx is logged with the request id; an `internal` one is answered `internal error`, its text never sent);
 * validation errors rewritten into field-and-rule messages (docs/decisions/0001-envelope-and-error-codes.md);
 * anything else is a 500 `internal error` whose stack is logged with the request id and never sent. Also answers
 * unknown routes with a 404 envelope.
 */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    app.decorateRequest('failureCode', null);
    app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      if (error instanceof DomainError) {
        request.failureCode = error.code;
        const status = statusOf(error.code);
        if (error.code === 'internal') {
          // A bug (e.g. a route registered without its auth scope): its text is for the log, not the client.
          request.log.error({ err: error }, 'internal error');
          return reply.code(500).send(errorBody(500, 'internal error'));
        }
        // Other 5xx (platform refused or unreachable, a dependency not ready, a timeout) keep their message,
        // which tells the client what to do, and are logged with the request id for the operator; one the client
        // caused by leaving (a synchronous send's wait withdrawn, src/http/client-gone.ts) is its doing, and nobody
        // reads the answer.
        if (status >= 500) {
          if (clientLeft(request)) {
            request.log.info({ code: error.code, message: error.message }, 'client closed the connection');
          } else {
            request.log.warn({ err: error, status }, 'request failed on the server side');
          }
        }
        if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter));
        // The envelope carries `retryAfter` on 429 only (docs/api.md, Errors); a 503 says it in the header.
        const retryAfter = status === 429 ? error.retryAfter : undefined;
        return reply.code(status).send(errorBody(status, error.message, retryAfter));
      }
      if (error.validation && error.validation.length > 0) {
        const issue = error.validation[0] as ValidationIssue;
        const message = validationMessage(issue, error.validationContext ?? 'body');
        return reply.code(400).send(errorBody(400, message));
      }
      const mapped = fastifyClientError(error, request);
      if (mapped) {
        const status = statusOf(mapped.code);
        return reply.code(status).send(errorBody(status, mapped.message));
      }
      if (clientLeft(request)) {
        // The client went away mid-request (e.g. closed the connection halfway through the body): its doing,
        // not a server fault, and nobody reads the answer. An ECONNRESET from a connection parley opened (a media
        // host, a receiver) is not the client's: it is the server's fault unless its own code mapped it.
        request.log.info({ code: error.code, message: error.message }, 'client closed the connection');
        return reply.code(400).send(errorBody(400, 'request was aborted by the client'));
      }
      if (error.statusCode === 403 || error.statusCode === 404) {
        // The dashboard's static files (@fastify/static) refuse a path leaving their root (`%2e%2e`) with a 403
        // and a missing file with a 404: both are simply not found, and say nothing about the file system.
        return reply.code(404).send(errorBody(404, notFoundMessage(request)));
      }
      request.log.error({ err: error }, 'unhandled error');
      request.failureCode = 'internal';
      return reply.code(500).send(errorBody(500, 'internal error'));
    });

    app.setNotFoundHandler((request, reply) => {
      reply.code(404).send(errorBody(404, notFoundMessage(request)));
    });
  },
  { name: 'parley-errors' },
);
