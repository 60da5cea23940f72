import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { EVENT_TYPES } from '../../../domain/instance.ts';
import { created, ok } from '../../schemas.ts';
import { DeliveriesQuery, deliveriesQueryOf } from '../v1/webhook.ts';
import { CreateEndpointBody, RotateSecretBody, UpdateEndpointBody } from '../v1/webhook-endpoints.ts';
import { InstanceParams, instanceFor } from './instances.ts';

/** `:id` (the instance) and `:endpointId` of an endpoint route. */
const EndpointParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  endpointId: Type.String({ minLength: 1, maxLength: 64 }),
});
/** {@link EndpointParams} and `:eventId`, an event of the endpoint's delivery log. */
const EndpointDeliveryParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  endpointId: Type.String({ minLength: 1, maxLength: 64 }),
  eventId: Type.String({ minLength: 1, maxLength: 64 }),
});

/**
 * The extra webhook endpoints of an instance on the dashboard (docs/decisions/0035-webhook-endpoints.md,
 * docs/decisions/0022-dashboard.md, docs/dashboard.md): list (with every event type an endpoint may name), create
 * (201, the secret in that answer only), change (URL, events, description, enabled), delete, rotate the secret (the
 * new one in that answer only; the replaced one signs too for `previousSecretGraceSeconds`, default 24 hours,
 * docs/decisions/0094-secret-rotation-grace.md), an endpoint's delivery log and redelivery, all through the
 * WebhookEndpointService of
 * `/v1/webhooks*`, so the rules, limits and errors are the API's (docs/api.md#webhook-endpoints). Reading needs the
 * viewer role, changing the member role and the CSRF token (guard.ts); another organization's instance answers 404
 * `instance not found`, another instance's endpoint 404 `webhook endpoint not found`. Every route is under
 * `/instances/:id`, so on several nodes it runs on the node holding the instance's session (routing.ts).
 */
export async function endpointRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { webhookEndpoints } = app.services.app;
  const viewer = { dashboard: 'viewer' } as const;
  const member = { dashboard: 'member' } as const;
  const hidden = { hide: true, params: InstanceParams } as const;
  const hiddenEndpoint = { hide: true, params: EndpointParams } as const;

  app.get('/instances/:id/endpoints', { config: viewer, schema: hidden }, async (request) =>
    ok({
      endpoints: await webhookEndpoints.list(await instanceFor(app, request)),
      // Every type an endpoint may name, in canonical order: the page offers one checkbox each.
      eventTypes: EVENT_TYPES,
    }),
  );

  app.post(
    '/instances/:id/endpoints',
    { config: member, schema: { ...hidden, body: CreateEndpointBody } },
    async (request, reply) => {
      const endpoint = await webhookEndpoints.create(
        await instanceFor(app, request),
        request.body,
        request.log,
      );
      reply.code(201);
      return created(endpoint);
    },
  );

  app.patch(
    '/instances/:id/endpoints/:endpointId',
    { config: member, schema: { ...hiddenEndpoint, body: UpdateEndpointBody } },
    async (request) =>
      ok(
        await webhookEndpoints.update(
          await instanceFor(app, request),
          request.params.endpointId,
          request.body,
          request.log,
        ),
      ),
  );

  app.delete(
    '/instances/:id/endpoints/:endpointId',
    { config: member, schema: hiddenEndpoint },
    async (request) => {
      await webhookEndpoints.remove(await instanceFor(app, request), request.params.endpointId);
      return ok({ details: 'Webhook endpoint deleted' });
    },
  );

  app.post(
    '/instances/:id/endpoints/:endpointId/rotate-secret',
    { config: member, schema: { ...hiddenEndpoint, body: RotateSecretBody } },
    async (request) =>
      ok(
        await webhookEndpoints.rotateSecret(
          await instanceFor(app, request),
          request.params.endpointId,
          request.body,
        ),
      ),
  );

  app.get(
    '/instances/:id/endpoints/:endpointId/deliveries',
    { config: viewer, schema: { ...hiddenEndpoint, querystring: DeliveriesQuery } },
    async (request) => {
      return ok(
        await webhookEndpoints.deliveries(
          await instanceFor(app, request),
          request.params.endpointId,
          deliveriesQueryOf(request.query),
        ),
      );
    },
  );

  app.post(
    '/instances/:id/endpoints/:endpointId/deliveries/:eventId/redeliver',
    { config: member, schema: { hide: true, params: EndpointDeliveryParams } },
    async (request) => {
      const eventId = request.params.eventId.toLowerCase();
      await webhookEndpoints.redeliver(await instanceFor(app, request), request.params.endpointId, eventId);
      return ok({ details: 'Redelivery queued', id: eventId });
    },
  );
}
