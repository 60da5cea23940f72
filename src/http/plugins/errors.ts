import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, type ErrorCode, statusOf } from '../../errors.ts';
import { type ValidationIssue, validationMessage } from '../validation.ts';

/** The error envelope body (SPEC Errors). */
export function errorBody(status: number, message: string, retryAfter?: number) {
  return { error: { code: status, message, ...(retryAfter === undefined ? {} : { retryAfter }) } };
}

/** The route's body limit in words (`1 MB`, `22 MB`), naming the limit as DESIGN D6 asks for 413s. */
function bodyLimitText(request: FastifyRequest): string {
  const bytes = request.routeOptions.bodyLimit ?? 0;
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}

/** Fastify's own client errors, mapped to our codes and messages. */
function fastifyClientError(
  error: FastifyError,
  request: FastifyRequest,
): { code: ErrorCode; message: string } | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: 'BAD_REQUEST', message: 'request body is not valid JSON' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'PAYLOAD_TOO_LARGE', message: `request body must be at most ${bodyLimitText(request)}` };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Content-Type must be application/json' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'BAD_REQUEST', message: 'Content-Length does not match the body' };
    default:
      if (error.statusCode === 400 && typeof error.message === 'string' && error.message.includes('JSON')) {
        return { code: 'BAD_REQUEST', message: 'request body is not valid JSON' };
      }
      return undefined;
  }
}

/**
 * The one error handler (Unkey's three tiers): our `ApiError`s with their status; validation errors rewritten
 * into field-and-rule messages (DESIGN D6); anything else is a 500 `internal error` whose stack is logged with
 * the request id and never sent. Also answers unknown routes with a 404 envelope.
 */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      if (error instanceof ApiError) {
        if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter));
        return reply.code(error.status).send(errorBody(error.status, error.message, error.retryAfter));
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
      request.log.error({ err: error }, 'unhandled error');
      return reply.code(500).send(errorBody(500, 'internal error'));
    });

    app.setNotFoundHandler((request, reply) => {
      reply.code(404).send(errorBody(404, `route ${request.method} ${request.url.split('?')[0]} not found`));
    });
  },
  { name: 'parley-errors' },
);
