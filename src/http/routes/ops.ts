import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Envelope, ok } from '../schemas.ts';

const Health = Type.Object({ status: Type.String({ examples: ['ok'] }) }, { title: 'Health' });
const error = Type.Ref('ErrorEnvelope');

/**
 * Operations endpoints (docs/decisions/0023-operations.md): health, readiness, Prometheus metrics and the OpenAPI
 * document. No auth.
 */
export async function opsRoutes(app: FastifyInstance): Promise<void> {
  const { metrics } = app.services;

  app.get(
    '/healthz',
    {
      config: { scope: 'public' },
      schema: {
        tags: ['operations'],
        operationId: 'getHealth',
        summary: 'Process is up',
        security: [],
        response: { 200: Envelope(Health, 'The process is up: `ok`'), 500: error },
      },
    },
    async () => ok({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      config: { scope: 'public' },
      schema: {
        tags: ['operations'],
        operationId: 'getReadiness',
        summary: 'Store reachable and migrated',
        security: [],
        response: {
          200: Envelope(Health, 'The store is reachable and migrated: `ready`'),
          500: error,
          503: error,
        },
      },
    },
    async () => {
      await app.services.app.readiness.check();
      return ok({ status: 'ready' });
    },
  );

  app.get(
    '/metrics',
    {
      config: { scope: 'public' },
      schema: {
        tags: ['operations'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        security: [],
        response: {
          200: {
            description: 'Metrics in the Prometheus text exposition format',
            content: { 'text/plain': { schema: Type.String() } },
          },
        },
      },
    },
    async (_request, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );

  app.get('/openapi.json', { config: { scope: 'public' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
}
