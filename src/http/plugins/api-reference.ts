import swagger from '@fastify/swagger';
import scalarApiReference from '@scalar/fastify-api-reference';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { HttpServices } from '../../app/http-services.ts';
import { errors } from '../../domain/errors.ts';
import { finishOpenapiDocument } from '../openapi.ts';

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
 * The API reference: @fastify/swagger collects the routes' schemas into the OpenAPI 3.1 document (finished by
 * src/http/openapi.ts; served at `/openapi.json` by the operations routes), and Scalar renders it at `/docs`.
 * Registered before the routes, so every route is collected.
 */
export const apiReferencePlugin = fp(
  async (app: FastifyInstance, options: { config: HttpServices['config'] }) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'parley',
          version: '1',
          license: { name: 'MIT', identifier: 'MIT' },
          description: API_DESCRIPTION,
        },
        servers: [{ url: options.config.publicUrl, description: 'this parley server' }],
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
  },
  { name: 'parley-api-reference' },
);
