import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { hasScope } from '../../../app/access.ts';
import { errors } from '../../../domain/errors.ts';
import type { EventType } from '../../../domain/instance.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { COMMON_ERROR_STATUSES, InstanceSelector } from '../../schemas.ts';
import { HEARTBEAT_MS, type OpenStreams, serveSse, serveWebSocket } from './event-stream-transports.ts';
import {
  AfterSequence,
  EventTypesParam,
  INSTANCE_ID_HEADER,
  INSTANCE_ID_RESPONSE_HEADER,
  parseEventTypes,
} from './events.ts';

/**
 * Query of `GET /v1/events/stream` (docs/api.md#event-stream, docs/decisions/0031-event-stream.md): `after` a
 * sequence number (default 0: from the oldest event kept), `types` comma-separated event type names (checked by
 * {@link parseEventTypes}), `from` the instance (docs/decisions/0002-instance-resolution.md).
 */
export const EventStreamQuery = Type.Object({
  from: Type.Optional(InstanceSelector),
  after: Type.Optional(
    AfterSequence(
      'only events with a greater sequence; 0 starts at the oldest kept. `Last-Event-ID`, when sent, wins',
    ),
  ),
  types: Type.Optional(EventTypesParam),
});
export type EventStreamQuery = Static<typeof EventStreamQuery>;

/** The message of a `Last-Event-ID` that is not a sequence number. */
const LAST_EVENT_ID_RULE = `Last-Event-ID must be an integer from 0 to ${Number.MAX_SAFE_INTEGER} (a sequence number)`;

/**
 * Headers of `GET /v1/events/stream`: `Last-Event-ID`, the sequence of the last event a reconnecting client got
 * (WHATWG HTML §9.2: a browser's EventSource sends it by itself); it wins over `after`.
 */
export const EventStreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,16}$',
      description:
        'the `id` of the last event received: the stream resumes after it. Sent by EventSource when it reconnects; wins over `after`',
      'x-message': LAST_EVENT_ID_RULE,
    }),
  ),
});

/** What the 400 of a request that is neither a WebSocket upgrade nor asks for server-sent events says. */
export const NOT_A_STREAM_REQUEST =
  'GET /v1/events/stream streams events: send Accept: text/event-stream (server-sent events) or a WebSocket upgrade; GET /v1/events reads them in pages';

/** Where a stream starts and what it carries, read from the request before it is served. */
interface StreamStart {
  after: number;
  types: EventType[] | undefined;
}

/**
 * The start of the stream `request` asks for: `Last-Event-ID` when sent, else `after` (default 0), and the parsed
 * `types`.
 * @throws DomainError invalid naming `Last-Event-ID` (above `Number.MAX_SAFE_INTEGER`) or an unknown event type.
 */
function streamStart(request: FastifyRequest): StreamStart {
  // Validated against EventStreamQuery before any preHandler runs.
  const query = request.query as EventStreamQuery;
  const lastEventId = request.headers['last-event-id'];
  let after = query.after ?? 0;
  if (typeof lastEventId === 'string') {
    after = Number(lastEventId);
    if (!Number.isSafeInteger(after)) throw errors.badRequest(LAST_EVENT_ID_RULE);
  }
  const { types } = query;
  return { after, types: types === undefined ? undefined : parseEventTypes(types) };
}

/** Whether `request` asks for server-sent events: its `Accept` names `text/event-stream` (RFC 9110 §12.5.1). */
function acceptsEventStream(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept
    .split(',')
    .map((range) => range.split(';')[0]?.trim().toLowerCase())
    .includes('text/event-stream');
}

/** The description of the operation in the OpenAPI document. */
const DESCRIPTION = [
  'The events of the instance as they are recorded, after a backlog of those already kept after `after` (or `Last-Event-ID`): each entry exactly as `GET /v1/events` returns it, in `sequence` order, with no gap and no duplicate between the backlog and what follows.',
  'Two forms on this path. **WebSocket**: an upgrade request; each entry is one text frame. The server ends the stream with close code 4401, 4403 or 4404 when the key is no longer valid or allowed or the instance no longer addressable, 4409 when the last sequence of the instance fell below the position of the stream (the store lost commits: resume from the sequence the reason names, or less), 1013 when the store is unavailable, 1001 when it shuts down. **Server-sent events**: `Accept: text/event-stream`; each entry is `id: <sequence>`, `event: <type>`, `data: <entry>`; a reconnecting client resumes with `Last-Event-ID`; a `: heartbeat` comment comes every 15 s; the server ends the stream with an `end` event whose data is the error envelope saying why.',
  'The key goes in `Authorization` as on every call (no query parameter). A request that is neither form is 400.',
].join('\n\n');

/**
 * `GET /v1/events/stream` (docs/api.md#event-stream, docs/decisions/0031-event-stream.md): the instance's events
 * pushed as they are recorded, after the backlog of those kept after `after` (or `Last-Event-ID`), over WebSocket
 * (an upgrade request) or server-sent events (`Accept: text/event-stream`); anything else is 400
 * {@link NOT_A_STREAM_REQUEST}. Scope `chat:webhook` and the rate limit apply to opening it (src/http/plugins/auth.ts);
 * the key is checked again, and the instance resolved again, at least every second while it is open
 * (`EventTail`). Served by the node the client reached, whichever holds the instance (`anyNode`). The opening answer
 * (SSE 200, WebSocket 101) carries {@link INSTANCE_ID_HEADER}, the instance streamed
 * (docs/decisions/0091-event-reads-name-their-instance.md). Streams still open when the server closes are ended (SSE
 * `end` 503, WebSocket 1001), and so is a stream that opens after the close began (its request was still in its hooks
 * then): streams never hold a stop back. No gateway path (docs/decisions/0021-gateway-form.md).
 */
export async function eventStreamRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { eventStream, eventLog, access, instances } = app.services.app;
  const open: OpenStreams = { streams: new Set(), closing: false };
  app.addHook('preClose', async () => {
    // A request still in its hooks now registers its stream later: the flag makes it shut that stream down at once.
    open.closing = true;
    for (const stream of [...open.streams]) stream.shutDown();
  });
  const starts = new WeakMap<FastifyRequest, StreamStart>();

  /** Opens the tail of `request`'s instance, rechecking its key, scope and instance as the hooks did. */
  const openTail = (request: FastifyRequest) => {
    const instance = instanceOf(request);
    const start = starts.get(request) ?? { after: 0, types: undefined };
    const authorization = request.headers.authorization;
    return eventStream.open(instance, {
      after: start.after,
      ...(start.types === undefined ? {} : { types: start.types }),
      recheck: async () => {
        const auth = await access.authenticate(authorization);
        if (!hasScope(auth, 'chat:webhook')) throw errors.missingScope('chat:webhook');
        await instances.resolve(auth, instance.id);
      },
    });
  };

  const errorStatuses = Object.fromEntries(
    [...COMMON_ERROR_STATUSES, 409].map((status) => [status, Type.Ref('ErrorEnvelope')]),
  );

  app.route({
    method: 'GET',
    url: '/stream',
    // HEAD cannot stream, nor be upgraded.
    exposeHeadRoute: false,
    config: { scope: 'chat:webhook', instance: 'query', anyNode: true },
    schema: {
      tags: ['events'],
      operationId: 'streamEvents',
      summary:
        'Event stream: the backlog after a sequence, then every event as it is recorded (WebSocket or SSE)',
      description: DESCRIPTION,
      querystring: EventStreamQuery,
      headers: EventStreamHeaders,
      response: {
        101: {
          description: 'WebSocket (an upgrade request): one text frame per entry, each a `LoggedEvent`',
          type: 'null',
          headers: INSTANCE_ID_RESPONSE_HEADER,
        },
        200: {
          description: `Server-sent events (\`Accept: text/event-stream\`): one event per entry, \`id\` its sequence, \`event\` its type, \`data\` the \`LoggedEvent\`; a comment every ${HEARTBEAT_MS / 1000} s`,
          content: {
            'text/event-stream': {
              schema: Type.String({
                examples: [
                  'id: 42\nevent: Message\ndata: {"type":"Message","event":{…},"instanceId":"…","sequence":42,"createdAt":"…"}\n\n',
                ],
              }),
            },
          },
          headers: INSTANCE_ID_RESPONSE_HEADER,
        },
        ...errorStatuses,
      },
    },
    // Before the upgrade: a bad `Last-Event-ID` or `types` is a 400 answer, a position past the log's end a 409,
    // not a stream closed at once. The instance's header goes on the 101 from the reply (src/http/websocket.ts).
    preHandler: async (request, reply) => {
      const start = streamStart(request);
      const field = typeof request.headers['last-event-id'] === 'string' ? 'Last-Event-ID' : 'after';
      const instance = instanceOf(request);
      await eventLog.checkPosition(instance, start.after, field);
      starts.set(request, start);
      reply.header(INSTANCE_ID_HEADER, instance.id);
    },
    handler: async (request, reply) => {
      if (!acceptsEventStream(request)) throw errors.badRequest(NOT_A_STREAM_REQUEST);
      const tail = openTail(request);
      reply.hijack();
      await serveSse(reply.raw, tail, {
        requestId: request.id,
        instanceId: instanceOf(request).id,
        log: request.log,
        open,
      });
    },
    wsHandler: async (socket, request) => {
      await serveWebSocket(socket, openTail(request), { log: request.log, open });
    },
  });
}
