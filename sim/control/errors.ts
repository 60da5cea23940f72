/**
 * The control API's error envelope, the same as parley's: `{ "error": { "code": <HTTP status>, "message" } }`.
 * Validation failures name the field and the rule; model errors carry their own status.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { ModelError } from '../model/accounts.ts';

/** Error raised by a control handler with an explicit status (e.g. 409 when no socket is open). */
export class ControlError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function validationMessage(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return error.message;
  const field = (first.instancePath || '').replace(/^\//, '').replaceAll('/', '.');
  const missing = (first.params as { missingProperty?: string }).missingProperty;
  if (missing) return `${missing}: is required`;
  const extra = (first.params as { additionalProperty?: string }).additionalProperty;
  if (extra) return `${extra}: unknown field`;
  return `${field || error.validationContext || 'body'}: ${first.message ?? 'is invalid'}`;
}

/** Installs the envelope for thrown errors and unknown routes. */
export function installErrorEnvelope(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, _request, reply) => {
    if (error.validation)
      return reply.status(400).send({ error: { code: 400, message: validationMessage(error) } });
    if (error instanceof ModelError || error instanceof ControlError) {
      return reply.status(error.status).send({ error: { code: error.status, message: error.message } });
    }
    const status =
      error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    const message = status === 500 ? 'internal simulator error' : error.message;
    if (status === 500) app.log.error({ err: error }, 'control request failed');
    return reply.status(status).send({ error: { code: status, message } });
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send({ error: { code: 404, message: `no route ${request.method} ${request.url.split('?')[0]}` } }),
  );
}
