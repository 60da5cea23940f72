import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { EVENT_TYPES } from '../../../domain/instance.ts';
import { EventTypeName, ok } from '../../schemas.ts';
import { DEFAULT_EVENTS_LIMIT, EventsQuery, parseEventTypes } from '../v1/events.ts';
import { HmacBody } from '../v1/session.ts';
import { DeliveriesQuery, deliveriesQueryOf, SetWebhookBody } from '../v1/webhook.ts';
import { principalOf } from './guard.ts';
import { InstanceParams, instanceFor } from './instances.ts';

const SubscribeBody = Type.Object({
  subscribe: Type.Array(EventTypeName, {
    minItems: 1,
    'x-message': '{field} must list at least one event type',
  }),
});
const DeliveryParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  eventId: Type.String({ minLength: 1, maxLength: 64 }),
});

/**
 * The webhook of an instance (docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0022-dashboard.md): URL,
 * subscription, HMAC key, a test event, the delivery log and redelivery, through the same webhook and session
 * services as `/v1/webhook*` and `/v1/session/hmac/config`; and the event log (docs/decisions/0030-event-log.md)
 * through the service of `GET /v1/events`, with the same query.
 */
export async function webhookRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { webhooks, session, dashboard, webhookTest, eventLog } = app.services.app;
  const viewer = { dashboard: 'viewer' } as const;
  const member = { dashboard: 'member' } as const;
  const hidden = { hide: true, params: InstanceParams } as const;

  app.get('/instances/:id/webhook', { config: viewer, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    return ok({
      ...(await webhooks.config(instance)),
      hasHmacKey: await session.hasHmacKey(instance),
      // Every type a subscription may name, in canonical order: the page offers one checkbox each.
      eventTypes: EVENT_TYPES,
    });
  });

  app.put(
    '/instances/:id/webhook',
    { config: member, schema: { ...hidden, body: SetWebhookBody } },
    async (request) => {
      const instance = await instanceFor(app, request);
      return ok({ webhook: await webhooks.setUrl(instance, request.body.webhookUrl, request.log) });
    },
  );

  app.delete('/instances/:id/webhook', { config: member, schema: hidden }, async (request) => {
    await webhooks.removeUrl(await instanceFor(app, request));
    return ok({ details: 'Webhook removed' });
  });

  app.put(
    '/instances/:id/subscribe',
    { config: member, schema: { ...hidden, body: SubscribeBody } },
    async (request) => {
      const subscribe = await dashboard.setSubscription(
        principalOf(request).org.id,
        request.params.id,
        request.body.subscribe,
      );
      return ok({ subscribe });
    },
  );

  app.put(
    '/instances/:id/hmac',
    { config: member, schema: { ...hidden, body: HmacBody } },
    async (request) => {
      await session.setHmacKey(await instanceFor(app, request), request.body.hmacKey);
      return ok({ details: 'HMAC key set' });
    },
  );

  app.delete('/instances/:id/hmac', { config: member, schema: hidden }, async (request) => {
    await session.removeHmacKey(await instanceFor(app, request));
    return ok({ details: 'HMAC key removed' });
  });

  app.post('/instances/:id/webhook/test', { config: member, schema: hidden }, async (request) =>
    ok(await webhookTest.send(await instanceFor(app, request))),
  );

  app.get(
    '/instances/:id/deliveries',
    { config: viewer, schema: { ...hidden, querystring: DeliveriesQuery } },
    async (request) => {
      return ok(await webhooks.deliveries(await instanceFor(app, request), deliveriesQueryOf(request.query)));
    },
  );

  app.get(
    '/instances/:id/event-log',
    { config: viewer, schema: { ...hidden, querystring: EventsQuery } },
    async (request) => {
      const { after, limit, types } = request.query;
      return ok(
        await eventLog.page(await instanceFor(app, request), {
          after: after ?? 0,
          limit: limit ?? DEFAULT_EVENTS_LIMIT,
          ...(types === undefined ? {} : { types: parseEventTypes(types) }),
        }),
      );
    },
  );

  app.post(
    '/instances/:id/deliveries/:eventId/redeliver',
    { config: member, schema: { hide: true, params: DeliveryParams } },
    async (request) => {
      const eventId = request.params.eventId.toLowerCase();
      await webhooks.redeliver(await instanceFor(app, request), eventId);
      return ok({ details: 'Redelivery queued', id: eventId });
    },
  );
}
