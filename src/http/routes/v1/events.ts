import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import { EVENT_TYPES, type EventType } from '../../../domain/instance.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceSelector, ok, responses } from '../../schemas.ts';

/**
 * The response header naming the instance a read of the log was served for, its UUID: on every page of
 * `GET /v1/events` and on the opening answer of `GET /v1/events/stream` (its SSE 200, its WebSocket 101). A client
 * that named no instance sends it back as `x-instance-id` on its later reads, so they keep to that instance's log
 * whichever instance becomes the default meanwhile (docs/decisions/0091-event-reads-name-their-instance.md).
 */
export const INSTANCE_ID_HEADER = 'x-instance-id';

/** The OpenAPI description of the {@link INSTANCE_ID_HEADER} response header of the event log and stream. */
export const INSTANCE_ID_RESPONSE_HEADER = {
  [INSTANCE_ID_HEADER]: {
    type: 'string',
    format: 'uuid',
    description:
      'the UUID of the instance whose log this is: send it as `x-instance-id` on the next reads, so they keep to this log when another instance becomes the default',
  },
} as const;

/** Most events one page of `GET /v1/events` returns (docs/decisions/0030-event-log.md). */
export const MAX_EVENTS_LIMIT = 1000;

/** Page size of `GET /v1/events` when `limit` is omitted. */
export const DEFAULT_EVENTS_LIMIT = 100;

/**
 * A sequence number to read after, 0 to `Number.MAX_SAFE_INTEGER` (default 0: from the oldest event kept), described
 * by `description` (docs/decisions/0030-event-log.md).
 */
export const AfterSequence = (description: string) =>
  Type.Integer({
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    default: 0,
    description,
    'x-message': `{field} must be an integer from 0 to ${Number.MAX_SAFE_INTEGER} (a sequence number)`,
  });

/** The `types` query: comma-separated event type names, checked by {@link parseEventTypes}. */
export const EventTypesParam = Type.String({
  minLength: 1,
  maxLength: 512,
  description: `only these event types, comma-separated (${EVENT_TYPES.join(', ')}); omitted: every type`,
  examples: ['Message,ReadReceipt'],
});

/**
 * Query of `GET /v1/events` (docs/api.md#event-log, docs/decisions/0030-event-log.md): `after` a sequence number
 * (default 0: from the oldest event kept), `limit` 1 to 1,000 (default 100), `types` comma-separated event type
 * names (checked by {@link parseEventTypes}), `from` the instance (docs/decisions/0002-instance-resolution.md).
 */
export const EventsQuery = Type.Object({
  from: Type.Optional(InstanceSelector),
  after: Type.Optional(
    AfterSequence(
      'only events with a greater sequence: the `next` of the previous page; 0 starts at the oldest kept',
    ),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_EVENTS_LIMIT,
      default: DEFAULT_EVENTS_LIMIT,
      description: 'most events in the page',
      'x-message': `{field} must be an integer from 1 to ${MAX_EVENTS_LIMIT}`,
    }),
  ),
  types: Type.Optional(EventTypesParam),
});
export type EventsQuery = Static<typeof EventsQuery>;

/** The fields every entry of the log ends with: the webhook body's `event`, `instanceId`, `sequence`, then `createdAt`. */
const entryTail = {
  event: Type.Unknown({
    description: 'the event object the webhook body carries, by type (docs/api.md#webhook-events)',
  }),
  instanceId: Type.String({ description: 'the instance the event belongs to' }),
  sequence: Type.Integer({
    minimum: 1,
    description: 'grows by one per event of the instance; the webhook body carries the same number',
  }),
  createdAt: Type.String({ format: 'date-time', description: 'when parley recorded the event' }),
};

/**
 * An entry of the log for a `ReadReceipt`: its webhook body (docs/decisions/0018-webhook-events-and-payloads.md:
 * `state` after `type`) plus `createdAt`.
 */
export const LoggedReceipt = Type.Object(
  {
    type: Type.Literal('ReadReceipt'),
    state: Type.Union([Type.Literal('Delivered'), Type.Literal('Read'), Type.Literal('Played')], {
      description: 'what the receipt says',
    }),
    ...entryTail,
  },
  { title: 'LoggedReceipt' },
);

/** An entry of the log for any other type: its webhook body plus `createdAt`. */
export const LoggedOther = Type.Object(
  {
    type: Type.Unsafe<Exclude<EventType, 'ReadReceipt'>>({
      type: 'string',
      enum: EVENT_TYPES.filter((type) => type !== 'ReadReceipt'),
    }),
    ...entryTail,
  },
  { title: 'LoggedOther' },
);

/**
 * One event of the log: the exact webhook body of the event (docs/decisions/0018-webhook-events-and-payloads.md),
 * in the same key order, plus `createdAt`. Two shapes because the response serialiser writes the required keys of
 * an object before its optional ones: with `state` required in the receipt shape and absent from the other, every
 * entry keeps the body's key order (test/events/event-log.test.ts compares the text with the webhook's).
 */
export const LoggedEvent = Type.Union([LoggedReceipt, LoggedOther], { title: 'LoggedEvent' });
export type LoggedEvent = Static<typeof LoggedEvent>;

/** `data` of `GET /v1/events`: events in sequence order and the `after` of the next request. */
export const EventsPage = Type.Object(
  {
    events: Type.Array(LoggedEvent),
    next: Type.Integer({
      minimum: 0,
      description:
        'pass as `after` next time: the sequence of the last event when the page is full (more may follow at once), otherwise how far the log was read (its last sequence, never less than `after`)',
    }),
  },
  {
    title: 'EventsPage',
    examples: [
      {
        events: [
          {
            type: 'Message',
            event: {
              info: {
                id: '3EB0C431C26A1916E07A',
                messageSource: {
                  chat: '5511988887777@s.whatsapp.net',
                  sender: '5511988887777@s.whatsapp.net',
                  isFromMe: false,
                  isGroup: false,
                },
                pushName: 'Ana',
                timestamp: '2026-01-15T12:00:00.000Z',
              },
              message: { conversation: 'Is the shop open?' },
            },
            instanceId: '0b6f3c3e-8f2a-4d1e-9c55-2f1d7a9e4b10',
            sequence: 42,
            createdAt: '2026-01-15T12:00:00.125Z',
          },
        ],
        next: 42,
      },
    ],
  },
);
export type EventsPage = Static<typeof EventsPage>;

/**
 * Reads the `types` query of `GET /v1/events`: comma-separated event type names (blanks around a name are ignored,
 * a name given twice counts once), in the order given.
 * @throws DomainError invalid `types contains unknown event type X (allowed: …)` naming the allowed list
 *   (`EVENT_TYPES`, the list subscriptions are checked against: docs/decisions/0001-envelope-and-error-codes.md).
 */
export function parseEventTypes(raw: string): EventType[] {
  const wanted: EventType[] = [];
  for (const name of raw.split(',').map((part) => part.trim())) {
    const type = EVENT_TYPES.find((known) => known === name);
    if (type === undefined) {
      throw errors.badRequest(
        `types contains unknown event type ${name === '' ? '""' : name} (allowed: ${EVENT_TYPES.join(', ')})`,
      );
    }
    if (!wanted.includes(type)) wanted.push(type);
  }
  return wanted;
}

/**
 * `GET /v1/events` (docs/api.md#event-log, docs/decisions/0030-event-log.md): the instance's recorded events in
 * sequence order, from any point still kept, whether or not a webhook is configured. Scope `chat:webhook`
 * (docs/decisions/0003-scopes-and-keys.md); the instance comes from `from` or `x-instance-id`
 * (docs/decisions/0002-instance-resolution.md). Each page carries {@link INSTANCE_ID_HEADER}, the instance it was
 * read from (docs/decisions/0091-event-reads-name-their-instance.md). No gateway path: the gateway form covers the
 * contract's paths only (docs/decisions/0021-gateway-form.md).
 */
export async function eventRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { eventLog } = app.services.app;
  const pageResponses = responses('One page of the event log, oldest first', EventsPage, 409);

  app.get(
    '',
    {
      config: { scope: 'chat:webhook', instance: 'query' },
      schema: {
        tags: ['events'],
        operationId: 'listEvents',
        summary: 'Event log: every recorded event of the instance in sequence order, webhook or not',
        querystring: EventsQuery,
        response: { ...pageResponses, 200: { ...pageResponses[200], headers: INSTANCE_ID_RESPONSE_HEADER } },
      },
    },
    async (request, reply) => {
      const { after, limit, types } = request.query;
      const instance = instanceOf(request);
      const page = await eventLog.page(instance, {
        after: after ?? 0,
        limit: limit ?? DEFAULT_EVENTS_LIMIT,
        ...(types === undefined ? {} : { types: parseEventTypes(types) }),
      });
      reply.header(INSTANCE_ID_HEADER, instance.id);
      return ok(page);
    },
  );
}
