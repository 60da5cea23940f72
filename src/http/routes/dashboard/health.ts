import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { HEALTH_RANGES, type HealthRange } from '../../../app/health.ts';
import { ok } from '../../schemas.ts';
import { principalOf } from './guard.ts';
import { InstanceParams, instanceFor } from './instances.ts';

const RANGES = Object.keys(HEALTH_RANGES) as HealthRange[];

/** `?range=`: `1h`, `24h` (the default) or `7d`. */
const HealthQuery = Type.Object({
  range: Type.Optional(
    Type.Unsafe<HealthRange>({
      type: 'string',
      enum: RANGES,
      'x-message': `{field} must be one of ${RANGES.join(', ')}`,
    }),
  ),
});

/**
 * Health over time (docs/decisions/0042-dashboard-health.md, docs/dashboard.md#health): for one instance, or for every
 * instance of the signed-in user's organization, the sends, received messages, webhook attempts, failures and
 * latency per bucket, and the session status changes. Viewer role.
 */
export async function healthRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { health, dashboard } = app.services.app;
  const viewer = { dashboard: 'viewer' } as const;

  app.get(
    '/health',
    { config: viewer, schema: { hide: true, querystring: HealthQuery } },
    async (request) => {
      const instances = await dashboard.instances(principalOf(request).org.id);
      return ok(
        await health.report(
          instances.map((instance) => instance.id),
          request.query.range ?? '24h',
        ),
      );
    },
  );

  app.get(
    '/instances/:id/health',
    { config: viewer, schema: { hide: true, params: InstanceParams, querystring: HealthQuery } },
    async (request) => {
      const instance = await instanceFor(app, request);
      return ok(await health.report([instance.id], request.query.range ?? '24h'));
    },
  );
}
