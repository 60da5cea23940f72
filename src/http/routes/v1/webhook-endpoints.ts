import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  DEFAULT_PREVIOUS_SECRET_GRACE_SECONDS,
  GRACE_RULE,
  MAX_PREVIOUS_SECRET_GRACE_SECONDS,
} from '../../../app/webhook-endpoints.ts';
import { instanceOf } from '../../plugins/instance.ts';
import {
  created,
  createdResponses,
  Details,
  EventTypeName,
  InstanceQuery,
  ok,
  responses,
} from '../../schemas.ts';
import { DeliveriesPage, DeliveriesQuery, deliveriesQueryOf } from './webhook.ts';

/** A webhook endpoint (docs/api.md#webhook-endpoints, docs/decisions/0035-webhook-endpoints.md), never its secret. */
export const WebhookEndpoint = Type.Object(
  {
    id: Type.String({ description: 'endpoint id' }),
    url: Type.String({
      description:
        'HTTPS URL receiving the events, or an amqp(s):// or nats:// broker URL (its password or token shown as ****)',
    }),
    events: Type.Array(EventTypeName, { description: 'event types delivered to it' }),
    description: Type.Union([Type.String(), Type.Null()]),
    enabled: Type.Boolean({ description: 'false after PATCH enabled:false or a 410 Gone' }),
    disabledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'when a 410 Gone disabled it',
    }),
    disabledReason: Type.Union([Type.String(), Type.Null()]),
    previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description:
        'while the secret the last rotate-secret replaced still signs (each request then carries two v1, ' +
        'signatures in webhook-signature, the new secret’s first), when it stops; null otherwise',
    }),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { title: 'WebhookEndpoint' },
);
export type WebhookEndpoint = Static<typeof WebhookEndpoint>;

/** An endpoint with its secret: the answer of creation and rotation only. */
export const WebhookEndpointWithSecret = Type.Composite(
  [
    WebhookEndpoint,
    Type.Object({
      secret: Type.String({
        description: 'whsec_ + base64 of the signing key (Standard Webhooks); shown only here',
      }),
    }),
  ],
  { title: 'WebhookEndpointWithSecret' },
);

const Url = Type.String({
  minLength: 1,
  maxLength: 4096,
  description:
    'HTTPS URL receiving events (its host must resolve to a public address), or an amqp(s):// or nats:// broker URL. A broker password or token sent as the mask **** (the URL as shown) keeps the stored one when the scheme, user, host and port are the stored URL’s; otherwise it is refused (400): send the secret',
  examples: ['https://example.com/parley-webhook'],
});
const Events = Type.Array(EventTypeName, {
  minItems: 1,
  maxItems: 32,
  description: 'event types delivered to this endpoint',
  'x-message': '{field} must list 1 to 32 event types',
});
const Description = Type.Union([Type.String({ maxLength: 500 }), Type.Null()], {
  description: 'a note for people (at most 500 characters)',
});

/** Body of `POST /v1/webhooks`. */
export const CreateEndpointBody = Type.Object(
  { url: Url, events: Events, description: Type.Optional(Description) },
  { title: 'CreateWebhookEndpointBody', additionalProperties: false },
);

/** Body of `PATCH /v1/webhooks/{id}`: each field omitted is kept. */
export const UpdateEndpointBody = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean({ description: 'true also re-enables an endpoint a 410 disabled' })),
  },
  { title: 'UpdateWebhookEndpointBody', additionalProperties: false },
);

/** Body of `POST /v1/webhooks/{id}/rotate-secret` (docs/decisions/0094-secret-rotation-grace.md): optional. */
export const RotateSecretBody = Type.Object(
  {
    previousSecretGraceSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_PREVIOUS_SECRET_GRACE_SECONDS,
        description:
          'how long the secret being replaced keeps signing, besides the new one, seconds ' +
          `(default ${DEFAULT_PREVIOUS_SECRET_GRACE_SECONDS}, 24 hours; ` +
          `at most ${MAX_PREVIOUS_SECRET_GRACE_SECONDS}, 7 days); 0 ends it at once (a leaked secret)`,
        'x-message': GRACE_RULE.replace('previousSecretGraceSeconds', '{field}'),
      }),
    ),
  },
  { title: 'RotateWebhookEndpointSecretBody', additionalProperties: false },
);

/** An endpoint id: a UUID, in any case (it is compared lower-cased, as event ids are). */
const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const RedeliverParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, description: 'endpoint id' }),
  eventId: Type.String({ minLength: 1, maxLength: 64, description: 'event id (the delivery log’s `id`)' }),
});
const RedeliverResult = Type.Object({
  details: Type.String(),
  id: Type.String({ description: 'the event id' }),
});
const EndpointList = Type.Object(
  { endpoints: Type.Array(WebhookEndpoint) },
  { title: 'WebhookEndpointList' },
);

const tags = ['webhook'];

/**
 * `/v1/webhooks*` (docs/api.md#webhook-endpoints, docs/decisions/0035-webhook-endpoints.md): an instance's extra
 * signed webhook endpoints. Scope `chat:webhook` (docs/decisions/0003-scopes-and-keys.md); the instance comes from
 * `from` or `x-instance-id` (docs/decisions/0002-instance-resolution.md); another instance's endpoint reads as 404.
 */
export async function webhookEndpointRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { webhookEndpoints } = app.services.app;
  const config = { scope: 'chat:webhook', instance: 'query' } as const;

  app.post(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'createWebhookEndpoint',
        summary: 'Add a webhook endpoint (at most 10 per instance); the answer shows its secret once',
        querystring: InstanceQuery,
        body: CreateEndpointBody,
        response: createdResponses('The endpoint, with its secret', WebhookEndpointWithSecret, 409),
      },
    },
    async (request, reply) => {
      const endpoint = await webhookEndpoints.create(instanceOf(request), request.body, request.log);
      reply.code(201);
      return created(endpoint);
    },
  );

  app.get(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'listWebhookEndpoints',
        summary: 'The instance’s webhook endpoints, oldest first (no secrets)',
        querystring: InstanceQuery,
        response: responses('The endpoints', EndpointList),
      },
    },
    async (request) => ok({ endpoints: await webhookEndpoints.list(instanceOf(request)) }),
  );

  app.get(
    '/:id',
    {
      config,
      schema: {
        tags,
        operationId: 'getWebhookEndpoint',
        summary: 'One webhook endpoint (no secret)',
        querystring: InstanceQuery,
        params: Params,
        response: responses('The endpoint', WebhookEndpoint, 404),
      },
    },
    async (request) => ok(await webhookEndpoints.get(instanceOf(request), request.params.id)),
  );

  app.patch(
    '/:id',
    {
      config,
      schema: {
        tags,
        operationId: 'updateWebhookEndpoint',
        summary: 'Change a webhook endpoint’s URL, events, description or enabled state',
        querystring: InstanceQuery,
        params: Params,
        body: UpdateEndpointBody,
        response: responses('The endpoint', WebhookEndpoint, 404),
      },
    },
    async (request) =>
      ok(await webhookEndpoints.update(instanceOf(request), request.params.id, request.body, request.log)),
  );

  app.delete(
    '/:id',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteWebhookEndpoint',
        summary: 'Delete a webhook endpoint with its queued deliveries and log',
        querystring: InstanceQuery,
        params: Params,
        response: responses('Endpoint deleted', Details, 404),
      },
    },
    async (request) => {
      await webhookEndpoints.remove(instanceOf(request), request.params.id);
      return ok({ details: 'Webhook endpoint deleted' });
    },
  );

  app.post(
    '/:id/rotate-secret',
    {
      config,
      schema: {
        tags,
        operationId: 'rotateWebhookEndpointSecret',
        summary: 'Give a webhook endpoint a new secret; the answer shows it once',
        description:
          'The secret replaced keeps signing besides the new one for previousSecretGraceSeconds (default 24 hours): ' +
          'each request then carries two v1, signatures in webhook-signature, the new secret’s first, so a receiver ' +
          'verifies with either while it deploys the new one. A second rotation within the grace keeps only the ' +
          'secret it replaces. 0 ends the old secret at once.',
        querystring: InstanceQuery,
        params: Params,
        body: RotateSecretBody,
        response: responses('The endpoint, with its new secret', WebhookEndpointWithSecret, 404),
      },
    },
    async (request) =>
      ok(await webhookEndpoints.rotateSecret(instanceOf(request), request.params.id, request.body)),
  );

  app.get(
    '/:id/deliveries',
    {
      config,
      schema: {
        tags,
        operationId: 'listWebhookEndpointDeliveries',
        summary:
          'An endpoint’s delivery log: its events newest first, with delivery status and every attempt',
        querystring: DeliveriesQuery,
        params: Params,
        response: responses('One page of the endpoint’s delivery log, newest first', DeliveriesPage, 404),
      },
    },
    async (request) => {
      return ok(
        await webhookEndpoints.deliveries(
          instanceOf(request),
          request.params.id,
          deliveriesQueryOf(request.query),
        ),
      );
    },
  );

  app.post(
    '/:id/deliveries/:eventId/redeliver',
    {
      config,
      schema: {
        tags,
        operationId: 'redeliverEndpointEvent',
        summary: 'Queue an event to a webhook endpoint again (a new round of attempts, due now)',
        description:
          'As POST /v1/webhook/deliveries/{id}/redeliver, for the endpoint’s delivery of the event: 404 when the ' +
          'event is not in the endpoint’s delivery log, 409 while the endpoint is disabled or an attempt is in ' +
          'flight. The default webhook’s delivery of the event is not touched.',
        querystring: InstanceQuery,
        params: RedeliverParams,
        response: responses('The event is queued for the endpoint again', RedeliverResult, 404, 409),
      },
    },
    async (request) => {
      const eventId = request.params.eventId.toLowerCase();
      await webhookEndpoints.redeliver(instanceOf(request), request.params.id, eventId);
      return ok({ details: 'Queued for redelivery', id: eventId });
    },
  );
}
