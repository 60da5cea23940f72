import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import scalarApiReference from '@scalar/fastify-api-reference';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, errors } from '../errors.ts';
import type { Services } from '../services.ts';
import { clientErrorHandler, frameworkErrorHandler } from './client-errors.ts';
import { rewriteGatewayUrl } from './gateway/paths.ts';
import { requestSerializer } from './log-redaction.ts';
import { finishOpenapiDocument } from './openapi.ts';
import { authPlugin } from './plugins/auth.ts';
import { errorsPlugin } from './plugins/errors.ts';
import { routes } from './routes/index.ts';
import { ErrorEnvelope } from './schemas.ts';

/** One registered route and what it requires (tests run the shared auth suite over every entry). */
export interface RouteEntry {
  method: string;
  url: string;
  scope: string | undefined;
  testOnly: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's services (store, sessions, auth, limits…), built once at boot. */
    services: Services;
    /** Every route registered, with its scope (DESIGN D5). */
    routeTable: RouteEntry[];
  }
}

/** Default cap on request bodies, bytes; media routes raise their own (DESIGN D11). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** Deepest JSON nesting accepted in a request body (DESIGN D11). */
export const MAX_JSON_DEPTH = 32;
const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** The introduction of the API reference (the OpenAPI `info.description`, Markdown). */
const API_DESCRIPTION = [
  'Self-hostable messaging session API: link accounts, send and receive messages over JSON/HTTP, and get events by signed webhooks.',
  '',
  '**Keys.** Every `/v1` operation needs an API key as `Authorization: Bearer <key>`. A `svc_test_` key drives sandbox instances (a simulated platform, see the sandbox operations); a `svc_live_` key drives linked accounts.',
  '',
  '**Instances.** `from` (query, or body field of a send) names the instance by UUID or linked phone number; without it, the most recently connected instance is used.',
  '',
  '**Answers.** Success is `{"success": true, "code": 200, "data": …}`. Errors are `{"error": {"code": <status>, "message": "…"}}`, the message naming the field and the rule; 429 adds `retryAfter` (seconds). Every response carries `x-request-id`.',
  '',
  '**Bodies** are JSON (`Content-Type: application/json`), at most 1 MB (media sends allow more).',
].join('\n');

/**
 * The API reference page at `/docs`: Scalar, reading `/openapi.json`, served entirely by this process (its
 * script at /docs/js/scalar.js; no web fonts, telemetry, AI agent or request proxy from Scalar's hosts), so it
 * works offline and sends nothing elsewhere.
 */
const DOCS_PAGE = {
  url: '/openapi.json',
  pageTitle: 'parley',
  title: 'parley',
  withDefaultFonts: false,
  telemetry: false,
  agent: { disabled: true },
  showDeveloperTools: 'never',
  hideClientButton: false,
  operationTitleSource: 'summary',
} as const;

/**
 * A validator for one HTTP part. Bodies are validated without type coercion (a string is not an array, "true"
 * is not a boolean: DESIGN D6 wants the field named, not guessed); query strings and params coerce, since
 * they only carry text. Unknown body fields are dropped; `x-message` carries D6 messages (see schemas.ts).
 */
function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    useDefaults: true,
    removeAdditional: true,
    allErrors: false,
    verbose: true,
    keywords: ['x-message'],
  });
  addFormats.default(ajv);
  return ajv;
}

/** `a.b[0].c` path of a key under `parent` (the style of validation messages, DESIGN D6). */
function childPath(parent: string, key: string, inArray: boolean): string {
  if (inArray) return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

/**
 * What is wrong with a parsed JSON body, if anything: nesting deeper than `MAX_JSON_DEPTH`, or a key that
 * would poison an object prototype once merged (`__proto__`, or `constructor` holding `prototype`: the keys
 * Fastify's own JSON parser refuses). `JSON.parse` keeps such keys as plain data, so they are found by walking
 * the value. The message names the key and where it is.
 */
export function jsonBodyProblem(value: unknown): string | undefined {
  const stack: [unknown, number, string][] = [[value, 1, '']];
  while (stack.length > 0) {
    const next = stack.pop();
    if (!next) break;
    const [node, depth, path] = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `request body is nested deeper than ${MAX_JSON_DEPTH} levels`;
    const inArray = Array.isArray(node);
    for (const [key, child] of Object.entries(node)) {
      const at = childPath(path, key, inArray);
      if (!inArray && key === '__proto__') {
        return `request body must not contain the key __proto__ (found at ${at})`;
      }
      if (!inArray && key === 'constructor' && child !== null && typeof child === 'object') {
        if (Object.hasOwn(child, 'prototype')) {
          return `request body must not contain the key constructor.prototype (found at ${at}.prototype)`;
        }
      }
      stack.push([child, depth + 1, at]);
    }
  }
  return undefined;
}

/**
 * Builds the HTTP app in layers (fastify/demo): external plugins (OpenAPI), app services, cross-cutting hooks
 * (request id, metrics, auth and limits), then routes. Does not listen; tests call `app.inject`.
 */
export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    // Request logs carry the URL with secret query values redacted (DESIGN D11: keys are never logged).
    loggerInstance: services.logger.child({}, { serializers: { req: requestSerializer } }),
    bodyLimit: DEFAULT_BODY_LIMIT,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    forceCloseConnections: 'idle',
    // Requests arriving while closing get our own 503 envelope (hook below), not Fastify's body.
    return503OnClosing: false,
    // Gateway paths (DESIGN D12) are served by their /v1 twin; see src/http/gateway/.
    rewriteUrl: rewriteGatewayUrl,
    // Errors raised before any route runs get the envelope too: the router's (414, bad percent-encoding)
    // and Node's HTTP parser's (400 bad request line or header byte, 431 headers too large, 408).
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler: clientErrorHandler(services.logger),
  });

  const bodyAjv = makeAjv(false);
  const textAjv = makeAjv('array');
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : textAjv).compile(schema),
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
      });
    }
  });

  // Layer 1: external plugins and the error envelope.
  await app.register(errorsPlugin);
  app.addSchema(ErrorEnvelope);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'parley',
        version: '1',
        license: { name: 'MIT', identifier: 'MIT' },
        description: API_DESCRIPTION,
      },
      servers: [{ url: services.config.publicUrl, description: 'this parley server' }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key: `svc_test_…` (sandbox instances) or `svc_live_…` (linked accounts), sent as `Authorization: Bearer <key>`.',
          },
        },
      },
      security: [{ bearer: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
    transformObject: finishOpenapiDocument,
  });
  await app.register(scalarApiReference, {
    routePrefix: '/docs',
    configuration: DOCS_PAGE,
    // The plugin also registers /docs/openapi.json and /docs/openapi.yaml, which cannot serve a document given
    // by URL: the JSON one points at the real document, the YAML one does not exist.
    hooks: {
      onRequest: async (request, reply) => {
        const path = request.url.split('?')[0];
        if (path === '/docs/openapi.json') return reply.redirect('/openapi.json', 301);
        if (path === '/docs/openapi.yaml') throw errors.notFound('route GET /docs/openapi.yaml not found');
      },
    },
  });

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
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return done(new ApiError('BAD_REQUEST', 'request body is not valid JSON'), undefined);
    }
    const problem = jsonBodyProblem(value);
    if (problem !== undefined) return done(new ApiError('BAD_REQUEST', problem), undefined);
    done(null, value);
  });
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    if (closing) {
      reply.header('connection', 'close');
      throw new ApiError('NOT_READY', 'server is shutting down');
    }
  });
  // An absent body is an empty object: optional-only bodies pass, required fields are named (DESIGN D6).
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.method !== 'GET' && request.method !== 'HEAD')
      request.body = {};
  });
  app.addHook('onResponse', async (request: FastifyRequest, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    services.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    services.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
  await app.register(authPlugin);

  // Layer 4: routes.
  await app.register(routes);
  return app;
}
