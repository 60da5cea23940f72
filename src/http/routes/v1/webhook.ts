import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type DeliveriesServiceQuery, LOG_STATUSES } from '../../../app/webhooks.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, EventTypeName, InstanceQuery, InstanceSelector, ok, responses } from '../../schemas.ts';
import { EventTypesParam, parseEventTypes } from './events.ts';

/**
 * Webhook configuration (docs/api.md#webhook, docs/decisions/0005-outbox-and-delivery.md), plus whether a 410 Gone
 * disabled it.
 */
export const WebhookConfig = Type.Object(
  {
    webhook: Type.String({ description: 'URL receiving events; empty when none is configured' }),
    subscribe: Type.Array(EventTypeName, { description: 'subscribed event types' }),
    disabled: Type.Boolean({
      description: 'true after the receiver answered 410 Gone: nothing is sent until POST /v1/webhook again',
    }),
    disabledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    disabledReason: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'WebhookConfig' },
);
export type WebhookConfig = Static<typeof WebhookConfig>;

/**
 * Body of `POST /v1/webhook` (docs/api.md#webhook; docs/decisions/0001-envelope-and-error-codes.md,
 * docs/decisions/0020-security-promises.md).
 */
export const SetWebhookBody = Type.Object(
  {
    webhookUrl: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'HTTPS URL receiving events; its host must resolve to a public address',
      examples: ['https://example.com/parley-webhook'],
    }),
  },
  { title: 'SetWebhookBody' },
);
export type SetWebhookBody = Static<typeof SetWebhookBody>;

/** One HTTP attempt of a delivery (docs/decisions/0005-outbox-and-delivery.md delivery log). */
export const AttemptEntry = Type.Object(
  {
    number: Type.Integer({ minimum: 1 }),
    at: Type.String({ format: 'date-time', description: 'when the attempt started' }),
    finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'null while the attempt is in flight',
    }),
    url: Type.String(),
    statusCode: Type.Union([Type.Integer(), Type.Null()], { description: 'null when no response arrived' }),
    durationMs: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'null while in flight',
    }),
    error: Type.Union([Type.String(), Type.Null()]),
    responseBody: Type.Union([Type.String(), Type.Null()], { description: 'first 2 KB of the response' }),
    responseTruncated: Type.Boolean(),
  },
  { title: 'AttemptEntry' },
);
export type AttemptEntry = Static<typeof AttemptEntry>;

/**
 * One event of the delivery log with its delivery state and attempts (docs/decisions/0005-outbox-and-delivery.md).
 */
export const DeliveryEntry = Type.Object(
  {
    id: Type.String({ description: 'event id, sent as webhook-id; use it to redeliver' }),
    type: EventTypeName,
    sequence: Type.Integer({ minimum: 1 }),
    status: Type.Union(
      LOG_STATUSES.map((s) => Type.Literal(s)),
      {
        description: 'pending (queued or in flight), delivered, failed, or unsent (never queued: see reason)',
      },
    ),
    reason: Type.Union([Type.String(), Type.Null()], { description: 'why an unsent event was not queued' }),
    createdAt: Type.String({ format: 'date-time' }),
    nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    deliveredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    lastError: Type.Union([Type.String(), Type.Null()]),
    payload: Type.Unknown({ description: 'the exact webhook body' }),
    attempts: Type.Array(AttemptEntry),
  },
  { title: 'DeliveryEntry' },
);
export type DeliveryEntry = Static<typeof DeliveryEntry>;

/** Query of `GET /v1/webhook/deliveries` (docs/decisions/0005-outbox-and-delivery.md). */
export const DeliveriesQuery = Type.Object({
  from: Type.Optional(InstanceSelector),
  status: Type.Optional(
    Type.Unsafe<(typeof LOG_STATUSES)[number]>({
      type: 'string',
      enum: [...LOG_STATUSES],
      'x-message': `{field} must be one of ${LOG_STATUSES.join(', ')}`,
    }),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 100,
      default: 20,
      'x-message': '{field} must be an integer from 1 to 100',
    }),
  ),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'nextCursor of the previous page' }),
  ),
  types: Type.Optional(EventTypesParam),
});
export type DeliveriesQuery = Static<typeof DeliveriesQuery>;

/**
 * The service query of a delivery-log request (`GET /v1/webhook/deliveries`, an endpoint's, the dashboard's): page
 * size (default 20), status, cursor and event types.
 * @throws DomainError invalid `types contains unknown event type X (allowed: …)`.
 */
export function deliveriesQueryOf(query: DeliveriesQuery): DeliveriesServiceQuery {
  const { status, cursor, types } = query;
  return {
    limit: query.limit ?? 20,
    ...(status === undefined ? {} : { status }),
    ...(cursor === undefined ? {} : { cursor }),
    ...(types === undefined ? {} : { types: parseEventTypes(types) }),
  };
}

/** A page of the delivery log, newest first. */
export const DeliveriesPage = Type.Object(
  {
    deliveries: Type.Array(DeliveryEntry),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'null on the last page' }),
  },
  { title: 'DeliveriesPage' },
);
export type DeliveriesPage = Static<typeof DeliveriesPage>;

const RedeliverParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const RedeliverResult = Type.Object({ details: Type.String(), id: Type.String() });

const tags = ['webhook'];

/**
 * `/v1/webhook*` (docs/api.md#webhook, docs/decisions/0005-outbox-and-delivery.md): configuration, the delivery log
 * and redelivery. Scope `chat:webhook` (docs/decisions/0003-scopes-and-keys.md); the instance comes from `from` or
 * `x-instance-id` (docs/decisions/0002-instance-resolution.md).
 */
export async function webhookRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { webhooks } = app.services.app;
  const config = { scope: 'chat:webhook', instance: 'query' } as const;

  app.get(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'getWebhook',
        summary: 'Webhook URL, subscribed event types and whether a 410 Gone disabled it',
        querystring: InstanceQuery,
        response: responses('The webhook configuration', WebhookConfig),
      },
    },
    async (request) => {
      return ok(await webhooks.config(instanceOf(request)));
    },
  );

  app.post(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'setWebhook',
        summary: 'Set the webhook URL (HTTPS; checked by the outbound guard); re-enables a disabled webhook',
        querystring: InstanceQuery,
        body: SetWebhookBody,
        response: responses('Webhook URL stored', Type.Object({ webhook: Type.String() })),
      },
    },
    async (request) => {
      const webhook = await webhooks.setUrl(instanceOf(request), request.body.webhookUrl, request.log);
      return ok({ webhook });
    },
  );

  app.delete(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteWebhook',
        summary:
          'Remove the webhook URL: later events are logged as unsent (redeliverable); queued deliveries wait for a new URL',
        querystring: InstanceQuery,
        response: responses('Webhook URL removed', Details),
      },
    },
    async (request) => {
      await webhooks.removeUrl(instanceOf(request));
      return ok({ details: 'Webhook removed' });
    },
  );

  app.get(
    '/deliveries',
    {
      config,
      schema: {
        tags,
        operationId: 'listDeliveries',
        summary: 'Delivery log: events newest first, with delivery status and every attempt',
        querystring: DeliveriesQuery,
        response: responses('One page of the delivery log, newest first', DeliveriesPage),
      },
    },
    async (request) => {
      return ok(await webhooks.deliveries(instanceOf(request), deliveriesQueryOf(request.query)));
    },
  );

  app.post(
    '/deliveries/:id/redeliver',
    {
      config,
      schema: {
        tags,
        operationId: 'redeliverEvent',
        summary: 'Queue an event again (a new round of attempts, due now)',
        querystring: InstanceQuery,
        params: RedeliverParams,
        response: responses('The event is queued for delivery again', RedeliverResult, 409),
      },
    },
    async (request) => {
      const id = request.params.id.toLowerCase();
      await webhooks.redeliver(instanceOf(request), id);
      return ok({ details: 'Queued for redelivery', id });
    },
  );
}
