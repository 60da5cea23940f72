import { pipeline, Transform } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthContext } from '../../app/access.ts';
import { errors } from '../../domain/errors.ts';
import type { Instance } from '../../domain/instance.ts';
import { callbackHook } from '../hook-style.ts';
import { type GatewayRoute, gatewayRouteOf } from './paths.ts';
import { invalidSignature, SIGNATURE_WINDOW_SECONDS, verifyGatewaySignature } from './signature.ts';

/** What the gateway hooks know about a request that came through a gateway path. */
export interface GatewayRequest {
  route: GatewayRoute;
  /**
   * The instance named by `x-instance-id`, after the key's access check (docs/decisions/0002-instance-resolution.md).
   */
  instance: Instance;
  /**
   * The instance's HMAC key in clear when it has one: the request must then be signed
   * (docs/decisions/0021-gateway-form.md).
   */
  hmacKey: string | null;
  /** The exact body bytes, kept only while a signature has to be checked. */
  rawBody: Buffer[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when the request came through a gateway path (docs/decisions/0021-gateway-form.md); null otherwise. */
    gateway: GatewayRequest | null;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The schema of property `name` of the route's body schema, when it declares one. */
function bodyPropertySchema(request: FastifyRequest, name: string): Record<string, unknown> | undefined {
  const body: unknown = request.routeOptions.schema?.body;
  const properties = isRecord(body) ? body.properties : undefined;
  const property = isRecord(properties) ? properties[name] : undefined;
  return isRecord(property) ? property : undefined;
}

/**
 * The gateway body of the text send names the text `message` (docs/gateway.md); the `/v1` twin
 * reads `body`. Checks `message` against the twin's `body` length rules first, so errors name the field the
 * caller sent (docs/decisions/0001-envelope-and-error-codes.md).
 * @throws DomainError invalid `message is required`, `message must be a string`, `message must not be empty`,
 *   `message must be at most N characters`.
 */
function renameMessage(request: FastifyRequest, body: Record<string, unknown>): void {
  const message = body.message;
  if (message === undefined) throw errors.badRequest('message is required');
  if (typeof message !== 'string') throw errors.badRequest('message must be a string');
  const rule = bodyPropertySchema(request, 'body');
  const length = [...message].length;
  const min = rule?.minLength;
  if (typeof min === 'number' && length < min) {
    throw errors.badRequest(
      min === 1 ? 'message must not be empty' : `message must be at least ${min} characters`,
    );
  }
  const max = rule?.maxLength;
  if (typeof max === 'number' && length > max) {
    throw errors.badRequest(`message must be at most ${max} characters`);
  }
  body.body = message;
  delete body.message;
}

/**
 * A pass-through stream that keeps a copy of the body bytes in `into`, up to `limit` bytes (the route's body
 * limit: beyond it the parser answers 413, so keeping more would only cost memory).
 */
function teeBody(payload: NodeJS.ReadableStream, into: Buffer[], limit: number): Transform {
  let kept = 0;
  const tee = new Transform({
    transform(chunk: Buffer | string, _encoding, callback) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (kept + bytes.length <= limit) into.push(bytes);
      kept += bytes.length;
      callback(null, bytes);
    },
  });
  pipeline(payload, tee, () => undefined);
  return tee;
}

/**
 * The alternate gateway form's request side (docs/gateway.md; docs/decisions/0021-gateway-form.md). The server's
 * `rewriteUrl` (see `paths.ts`) already routed a gateway path to its `/v1` twin, so auth, scope
 * (docs/decisions/0003-scopes-and-keys.md), rate limits, validation and the handler are the twin's; these hooks add
 * what differs:
 * - `onRequest` (after auth): `x-instance-id` is required and must name an instance the key may address
 *   (400 `x-instance-id is required`, 400 when not a UUID, 404 `instance not found`);
 * - `preParsing`: keeps the raw body bytes when the instance has an HMAC key;
 * - `preValidation`: verifies `x-timestamp`/`x-signature` (401 `invalid request signature`, stale or replayed
 *   → 401) and renames the text send's `message` to `body`.
 * The instance resolved here is the one the twin's handler addresses: the instance plugin (plugins/instance.ts)
 * takes `request.gateway.instance` instead of resolving the query or body selector again.
 * Seen signatures are remembered in Redis when configured, else in the `gateway_replay` table.
 */
export const gatewayPlugin = fp(
  async (app: FastifyInstance) => {
    const { clock } = app.services;
    const { gateway: service } = app.services.app;
    app.decorateRequest('gateway', null);

    /** Checks a gateway request's headers and resolves its instance for `auth`. */
    const admit = async (request: FastifyRequest, auth: AuthContext, route: GatewayRoute): Promise<void> => {
      const header = request.headers['x-instance-id'];
      if (header === undefined || header === '') throw errors.badRequest('x-instance-id is required');
      if (typeof header !== 'string' || !UUID.test(header.trim())) {
        throw errors.badRequest('x-instance-id must be an instance UUID');
      }
      const { instance, hmacKey } = await service.instance(auth, header.trim());
      // Unsigned requests are refused before their body is read; the signature itself is checked once it is.
      if (hmacKey !== null && (!request.headers['x-timestamp'] || !request.headers['x-signature'])) {
        throw invalidSignature();
      }
      request.gateway = { route, instance, hmacKey, rawBody: [] };
    };
    /** Verifies a gateway request's signature (when its instance has a key) and renames its text field. */
    const verify = async (request: FastifyRequest, gateway: GatewayRequest): Promise<void> => {
      if (gateway.hmacKey !== null) {
        const verified = verifyGatewaySignature(
          gateway.hmacKey,
          { timestamp: request.headers['x-timestamp'], signature: request.headers['x-signature'] },
          {
            method: request.method,
            pathWithQuery: request.originalUrl,
            body: Buffer.concat(gateway.rawBody),
          },
          clock(),
        );
        // Remembered until the timestamp can no longer pass the window check (compared in whole seconds).
        const expiresAtMs = (verified.timestamp + SIGNATURE_WINDOW_SECONDS + 1) * 1000;
        if (!(await service.remember(gateway.instance.id, verified.signature, expiresAtMs))) {
          throw invalidSignature('this signature was already used');
        }
        gateway.rawBody = [];
      }
      if (gateway.route.textBody && isRecord(request.body)) renameMessage(request, request.body);
    };

    // Every request passes these hooks and few are gateway requests: callback style (src/http/hook-style.ts).
    app.addHook(
      'onRequest',
      callbackHook((request) => {
        const route = gatewayRouteOf(request.raw);
        return route && request.auth ? admit(request, request.auth, route) : undefined;
      }),
    );
    app.addHook('preParsing', (request, _reply, payload, done) => {
      const gateway = request.gateway;
      if (!gateway?.hmacKey) done(null, payload);
      else {
        const limit = request.routeOptions.bodyLimit ?? Number.POSITIVE_INFINITY;
        done(null, teeBody(payload, gateway.rawBody, limit));
      }
    });
    app.addHook(
      'preValidation',
      callbackHook((request) => (request.gateway ? verify(request, request.gateway) : undefined)),
    );
  },
  { name: 'parley-gateway', dependencies: ['parley-auth', 'parley-services'] },
);
