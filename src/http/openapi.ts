import type { SwaggerTransformObject } from '@fastify/swagger';
import { addGatewayPaths } from './gateway/openapi.ts';
import { ERROR_RESPONSES, HEADERS, type Json, PARAMETERS, ref, TAGS } from './openapi-components.ts';
import { REQUEST_EXAMPLES } from './openapi-examples.ts';

/**
 * The OpenAPI document served at `/openapi.json`, finished for readers and client generators. @fastify/swagger
 * builds it from the routes' TypeBox schemas; {@link finishOpenapiDocument} then adds what the routes do not
 * say themselves: the gateway paths, the errors raised by the layers every request passes through, shared
 * responses, headers and schemas under `components` (referenced, not copied), and the tag list.
 */

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;
/** Methods whose requests Fastify parses a body for: they can answer 413 and 415 (src/http/app.ts). */
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);

function errorResponse(status: string, error: { description: string; example: string }): Json {
  return {
    description: error.description,
    headers: {
      'x-request-id': ref('headers', 'RequestId'),
      ...(status === '429'
        ? {
            'retry-after': ref('headers', 'RetryAfter'),
            ratelimit: ref('headers', 'RateLimit'),
            'ratelimit-policy': ref('headers', 'RateLimitPolicy'),
          }
        : {}),
    },
    content: {
      'application/json': {
        schema: ref('schemas', 'ErrorEnvelope'),
        example: {
          error: {
            code: Number(status),
            message: error.example,
            ...(status === '429' ? { retryAfter: 12 } : {}),
          },
        },
      },
    },
  };
}

function* operationsOf(paths: Json): Generator<[string, string, Json]> {
  for (const [path, item] of Object.entries(paths)) {
    if (!isRecord(item)) continue;
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (isRecord(operation)) yield [path, method, operation];
    }
  }
}

/** Sets the ready example body of the operation (src/http/openapi-examples.ts), when it has one. */
function addRequestExample(operation: Json): void {
  const body = operation.requestBody;
  const id = operation.operationId;
  if (!isRecord(body) || !isRecord(body.content) || typeof id !== 'string') return;
  const json = body.content['application/json'];
  const example = REQUEST_EXAMPLES[id];
  if (isRecord(json) && example !== undefined) json.example = structuredClone(example);
}

/**
 * An authenticated `POST` takes `Idempotency-Key` (src/http/plugins/idempotency.ts): the header parameter, 409 (the
 * first request with the key still runs) and 422 (the key was used with another request).
 */
function addIdempotency(method: string, operation: Json, authenticated: boolean): void {
  if (method !== 'post' || !authenticated) return;
  const parameters = Array.isArray(operation.parameters) ? operation.parameters : [];
  operation.parameters = [...parameters, ref('parameters', 'IdempotencyKey')];
  const responses: Json = isRecord(operation.responses) ? operation.responses : {};
  responses['409'] ??= {};
  responses['422'] ??= {};
  operation.responses = responses;
}

/** A body whose schema requires nothing may be left out (Fastify's plugin marks every body required). */
function markOptionalBody(operation: Json): void {
  const body = operation.requestBody;
  if (!isRecord(body) || !isRecord(body.content)) return;
  const json = body.content['application/json'];
  const schema = isRecord(json) ? json.schema : undefined;
  if (isRecord(schema) && (!Array.isArray(schema.required) || schema.required.length === 0)) {
    body.required = false;
  }
}

/**
 * The responses of one operation: the route's own, plus 413 and 415 for a method with a body, and 414 and 431
 * on every operation (the URL and header limits apply to any request: src/http/plugins/edge.ts,
 * src/http/client-errors.ts); every error
 * status as a reference to its shared response; `x-request-id` (and the rate-limit headers on authenticated
 * operations) on the success response; sorted by status.
 */
function finishResponses(method: string, operation: Json, authenticated: boolean): void {
  const responses: Json = isRecord(operation.responses) ? operation.responses : {};
  if (BODY_METHODS.has(method)) {
    responses['413'] ??= {};
    responses['415'] ??= {};
  }
  responses['414'] ??= {};
  responses['431'] ??= {};
  const out: Json = {};
  for (const status of Object.keys(responses).sort()) {
    const response = responses[status];
    const shared = ERROR_RESPONSES[status];
    if (shared) {
      out[status] = ref('responses', shared.name);
      continue;
    }
    if (isRecord(response)) {
      dropRepeatedDescription(response);
      const headers = isRecord(response.headers) ? response.headers : {};
      response.headers = {
        ...headers,
        'x-request-id': ref('headers', 'RequestId'),
        ...(authenticated
          ? { ratelimit: ref('headers', 'RateLimit'), 'ratelimit-policy': ref('headers', 'RateLimitPolicy') }
          : {}),
        ...(authenticated && method === 'post'
          ? { 'idempotent-replayed': ref('headers', 'IdempotentReplayed') }
          : {}),
      };
    }
    out[status] = response;
  }
  operation.responses = out;
}

/** The success envelope's description is the response's (src/http/schemas.ts): said once, on the response. */
function dropRepeatedDescription(response: Json): void {
  if (!isRecord(response.content)) return;
  for (const media of Object.values(response.content)) {
    if (isRecord(media) && isRecord(media.schema) && media.schema.description === response.description) {
      delete media.schema.description;
    }
  }
}

/** Removes `x-message` (the validator's message templates, src/http/schemas.ts): not part of the contract. */
function stripInternal(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) stripInternal(item);
    return;
  }
  if (!isRecord(node)) return;
  delete node['x-message'];
  for (const value of Object.values(node)) stripInternal(value);
}

/**
 * Moves every titled schema found under `node` into `schemas` (keyed by its title) and replaces it with a
 * `$ref`, innermost first, so a schema used by several operations is written once.
 * @throws Error when two different schemas carry the same title (a naming bug in the routes).
 */
function hoistTitled(node: unknown, schemas: Json): unknown {
  if (Array.isArray(node)) return node.map((item) => hoistTitled(item, schemas));
  if (!isRecord(node)) return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node)) out[key] = hoistTitled(value, schemas);
  const title = out.title;
  if (typeof title !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(title) || '$ref' in out) return out;
  const existing = schemas[title];
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(out)) {
    throw new Error(`OpenAPI: two different schemas are named ${title}`);
  }
  schemas[title] = out;
  return ref('schemas', title);
}

/**
 * Shares the schemas of one operation. A request body stays inline (its properties' shared schemas are
 * referenced): client generators read a property with a `default` as optional only inside a request body
 * (openapi-typescript makes it required in a shared schema), and every body belongs to one operation anyway.
 */
function hoistOperationSchemas(operation: Json, schemas: Json): void {
  const body = operation.requestBody;
  if (isRecord(body) && isRecord(body.content)) {
    for (const media of Object.values(body.content)) {
      if (!isRecord(media) || !isRecord(media.schema)) continue;
      const { title: _title, ...schema } = media.schema;
      const inner: Json = {};
      for (const [key, value] of Object.entries(schema)) inner[key] = hoistTitled(value, schemas);
      media.schema = inner;
    }
  }
  if (!isRecord(operation.responses)) return;
  for (const response of Object.values(operation.responses)) {
    if (isRecord(response) && isRecord(response.content)) {
      response.content = hoistTitled(response.content, schemas);
    }
  }
}

/** Sorts an object's keys (stable component order in the document). */
function sortedKeys(value: Json): Json {
  return Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * `transformObject` of @fastify/swagger: finishes the generated OpenAPI 3.1 document.
 * - a ready example on every request body (src/http/openapi-examples.ts), then the gateway paths (copies of
 *   their `/v1` twins, src/http/gateway/openapi.ts);
 * - a body that requires no field is `required: false` (connect's optional body);
 * - 413 and 415 on every operation with a body (the JSON body parser answers them for any route), 414 and 431
 *   on every operation (URL and header limits);
 * - every authenticated `POST` takes the `Idempotency-Key` header and lists 409 and 422; its success answer may
 *   carry `Idempotent-Replayed`;
 * - error statuses reference shared responses under `components.responses`, each with the error envelope,
 *   an example and `x-request-id` (429: `Retry-After` and the rate-limit headers);
 * - titled schemas move to `components.schemas` and are referenced (request bodies themselves stay inline);
 * - validator templates (`x-message`) are removed; the tag list is set.
 */
export const finishOpenapiDocument: SwaggerTransformObject = (documentObject) => {
  if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
  const document: Json = documentObject.openapiObject as Json;
  const paths: Json = isRecord(document.paths) ? document.paths : {};
  for (const [, , operation] of operationsOf(paths)) addRequestExample(operation);
  addGatewayPaths(paths);
  const globalSecurity = Array.isArray(document.security) && document.security.length > 0;
  const components: Json = isRecord(document.components) ? document.components : {};
  const schemas: Json = isRecord(components.schemas) ? components.schemas : {};
  for (const [, method, operation] of operationsOf(paths)) {
    const security = Array.isArray(operation.security) ? operation.security.length > 0 : globalSecurity;
    markOptionalBody(operation);
    addIdempotency(method, operation, security);
    finishResponses(method, operation, security);
    hoistOperationSchemas(operation, schemas);
  }
  stripInternal(paths);
  stripInternal(schemas);
  const responses: Json = {};
  for (const [status, error] of Object.entries(ERROR_RESPONSES)) {
    responses[error.name] = errorResponse(status, error);
  }
  document.components = {
    ...components,
    schemas: sortedKeys(schemas),
    responses,
    headers: HEADERS,
    parameters: PARAMETERS,
  };
  document.tags = TAGS;
  return documentObject.openapiObject;
};
