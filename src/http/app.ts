import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyRequest, LogController } from 'fastify';
import fp from 'fastify-plugin';
import type { HttpServices } from '../app/http-services.ts';
import { DomainError } from '../domain/errors.ts';
import { clientErrorHandler, frameworkErrorHandler } from './client-errors.ts';
import { addClosingHooks } from './closing.ts';
import { rewriteGatewayUrl } from './gateway/paths.ts';
import { parseJsonBody, textPartProblem } from './json-body.ts';
import { requestSerializer } from './log-redaction.ts';
import { apiReferencePlugin } from './plugins/api-reference.ts';
import { authPlugin } from './plugins/auth.ts';
import { edgePlugin } from './plugins/edge.ts';
import { errorsPlugin } from './plugins/errors.ts';
import { idempotencyPlugin } from './plugins/idempotency.ts';
import { instancePlugin } from './plugins/instance.ts';
import { requestLoggerFactory } from './request-logger.ts';
import { routes } from './routes/index.ts';
import { buildSharedSerializer, validatorFor } from './schema-compilers.ts';
import { ErrorEnvelope } from './schemas.ts';
import { registerWebSocket } from './websocket.ts';

/** One registered route and what it requires (tests run the shared auth suite over every entry). */
export interface RouteEntry {
  method: string;
  url: string;
  scope: string | undefined;
  testOnly: boolean;
  /** The least dashboard role a dashboard route needs, or `public` (docs/decisions/0022-dashboard.md); else undefined. */
  dashboard: string | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The application services and the few process-wide things HTTP uses (src/app/http-services.ts). */
    services: HttpServices;
    /** Every route registered, with its scope (docs/decisions/0003-scopes-and-keys.md). */
    routeTable: RouteEntry[];
  }
}

/** Default cap on request bodies, bytes; media routes raise their own (docs/decisions/0020-security-promises.md). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Builds the HTTP app in layers (fastify/demo): external plugins (OpenAPI), app services, cross-cutting hooks
 * (request id, metrics, auth and limits), then routes. Does not listen; tests call `app.inject`.
 */
export async function buildApp(services: HttpServices): Promise<FastifyInstance> {
  const app = Fastify({
    // Request logs carry the URL with secret query values redacted (docs/decisions/0020-security-promises.md: keys
    // are never logged).
    loggerInstance: services.logger.child({}, { serializers: { req: requestSerializer } }),
    // One line per request, written by the edge plugin when the response is sent.
    logController: new LogController({ disableRequestLogging: true }),
    // A request's pino child is made at its first written line, not for every request.
    childLoggerFactory: requestLoggerFactory,
    // A request without Host gets the envelope from the edge plugin, not Node's bare 400.
    http: { requireHostHeader: false },
    bodyLimit: DEFAULT_BODY_LIMIT,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    forceCloseConnections: 'idle',
    // Requests arriving while closing get our own 503 envelope (hook below), not Fastify's body.
    return503OnClosing: false,
    // Gateway paths (docs/decisions/0021-gateway-form.md) are served by their /v1 twin; see src/http/gateway/.
    rewriteUrl: rewriteGatewayUrl,
    // Errors raised before any route runs get the envelope too: the router's (414, bad percent-encoding)
    // and Node's HTTP parser's (400 bad request line or header byte, 431 headers too large, 408).
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler: clientErrorHandler(services.logger),
    // Response serializers compiled once per schema in the process (src/http/schema-compilers.ts).
    schemaController: { compilersFactory: { buildSerializer: buildSharedSerializer } },
  });

  app.setValidatorCompiler(({ schema, httpPart }) =>
    validatorFor(schema, httpPart === 'body' ? 'body' : 'text'),
  );

  const routeTable: RouteEntry[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      routeTable.push({
        method,
        url: route.url,
        scope: route.config?.scope,
        testOnly: route.config?.testOnly === true,
        dashboard: route.config?.dashboard,
      });
    }
  });

  // Layer 1: external plugins and the error envelope.
  await app.register(errorsPlugin);
  // WebSocket upgrades go through the routes and their hooks like any request; only the event stream accepts one.
  await registerWebSocket(app);
  app.addSchema(ErrorEnvelope);
  await app.register(apiReferencePlugin, { config: services.config });

  // Layer 2: app services.
  await app.register(
    fp(
      async (instance: FastifyInstance) => {
        instance.decorate('services', services);
      },
      { name: 'parley-services' },
    ),
  );

  // Layer 3: cross-cutting hooks: JSON parsing limits, request id, metrics, auth + limits.
  // Only JSON bodies: without Fastify's text/plain parser, text/plain is a 415 like any other wrong type.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
  // While closing, connections are let go of (src/http/closing.ts) and a request arriving gets 503 with
  // `Connection: close`.
  const closing = addClosingHooks(app);
  // The hooks here run on every request and never wait: callback style, no promise each (src/http/hook-style.ts).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (closing()) {
      reply.header('connection', 'close');
      throw new DomainError('not_ready', 'server is shutting down');
    }
    done();
  });
  await app.register(edgePlugin, { publicUrl: services.config.publicUrl });
  // An absent body is an empty object: optional-only bodies pass, required fields are named
  // (docs/decisions/0001-envelope-and-error-codes.md).
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && request.method !== 'GET' && request.method !== 'HEAD')
      request.body = {};
    // U+0000 in a path parameter or the query (only as `%00` in a URL): refused like one in a body
    // (docs/decisions/0075-no-nul-characters.md).
    if (request.url.includes('%00')) {
      const problem = textPartProblem(request.params) ?? textPartProblem(request.query);
      if (problem !== undefined) throw new DomainError('invalid', problem);
    }
    done();
  });
  app.addHook('onResponse', (request: FastifyRequest, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const labels = { method: request.method, route, status: String(reply.statusCode) };
    services.metrics.httpRequests.inc(labels);
    services.metrics.httpDuration.observe(labels, reply.elapsedTime / 1000);
    done();
  });
  await app.register(authPlugin);
  // Before the instance plugin: a key is claimed once, on the node that received the request, before any forwarding.
  await app.register(idempotencyPlugin);
  await app.register(instancePlugin);

  // Layer 4: routes.
  await app.register(routes);
  return app;
}
