import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { DomainError } from '../../domain/errors.ts';
import type { Instance } from '../../domain/instance.ts';
import { callbackHook } from '../hook-style.ts';
import { selectorOf } from '../instance-selector.ts';
import { authOf } from './auth.ts';
import { routeInstanceRequest } from './forward.ts';

/** Where a route's instance selector comes from (see {@link RouteInstanceConfig.instance}). */
export type InstanceWhere = 'query' | 'body' | 'path';

/**
 * What a route declares in its `config` about the instance it addresses (docs/decisions/0002-instance-resolution.md).
 */
export interface RouteInstanceConfig {
  /**
   * Where the instance selector comes from: `query` (query `from`, else header `x-instance-id`), `body` (a
   * send: body `from` first, then as for `query`), or `path` (the path parameter `id`, an instance UUID only:
   * `/v1/instances/{id}`, docs/decisions/0029-instances-over-the-api.md). Omitted: the route addresses no instance.
   */
  instance?: InstanceWhere;
  /**
   * Served by whichever node received the request, never forwarded to the node holding the instance's session
   * (docs/decisions/0008-leases-and-fencing.md): for a route that only reads the shared store and whose answer cannot
   * be relayed, the event stream (docs/decisions/0031-event-stream.md).
   */
  anyNode?: true;
  /**
   * The route does its work once per forward id (a send: its job and message id follow from it,
   * docs/decisions/0008-leases-and-fencing.md), so a forward whose connection closed before the owner answered is
   * sent again (src/http/plugins/forward.ts).
   */
  repeatable?: true;
}

declare module 'fastify' {
  interface FastifyContextConfig extends RouteInstanceConfig {}
  interface FastifyRequest {
    /** The instance the request addresses, resolved once before the handler; null on routes without one. */
    instance: Instance | null;
  }
}

/**
 * The instance of a request whose route declares `config.instance`, resolved once by this plugin: what a route hands
 * to an application service, so a request reads its instance once.
 * @throws DomainError internal when the route declares none (a wiring bug).
 */
export function instanceOf(request: FastifyRequest): Instance {
  if (!request.instance) throw new DomainError('internal', 'route is missing its instance selector');
  return request.instance;
}

/** Path parameter `id` of an instance route (`/v1/instances/:id`); `''` when absent. */
function pathId(request: FastifyRequest): string {
  const params: unknown = request.params;
  if (typeof params !== 'object' || params === null || !('id' in params)) return '';
  return typeof params.id === 'string' ? params.id : '';
}

/** Body `from` of a send, when given and not empty. */
function bodyFrom(request: FastifyRequest): string | undefined {
  const body: unknown = request.body;
  if (typeof body !== 'object' || body === null || !('from' in body)) return undefined;
  return typeof body.from === 'string' && body.from !== '' ? body.from : undefined;
}

/**
 * Resolves the addressed instance once per request, in a `preHandler` (after auth, scope, rate limit and
 * validation: docs/decisions/0024-engines-and-data-flow.md order), and puts it on `request.instance` for the handler.
 * A request that came through a gateway path addresses the instance its `x-instance-id` named, already resolved by
 * the gateway (docs/decisions/0021-gateway-form.md).
 * @throws DomainError not_found `instance not found`; invalid `several instances: name one with from`
 * (docs/decisions/0002-instance-resolution.md; a path `id` never falls back to a default).
 */
export const instancePlugin = fp(
  async (app: FastifyInstance) => {
    const { cluster } = app.services;
    const { instances } = app.services.app;
    app.decorateRequest('instance', null);
    app.decorateRequest('forwardId', null);
    /** Resolves the instance a request addresses `where`, and forwards the request to its owner if another node. */
    const resolve = async (
      request: FastifyRequest,
      reply: FastifyReply,
      where: InstanceWhere,
    ): Promise<FastifyReply | undefined> => {
      if (request.gateway) {
        request.instance = request.gateway.instance;
      } else if (where === 'path') {
        request.instance = await instances.resolveById(authOf(request), pathId(request));
      } else {
        const selector = (where === 'body' ? bodyFrom(request) : undefined) ?? selectorOf(request);
        request.instance = await instances.resolve(authOf(request), selector);
      }
      // Several nodes (docs/decisions/0008-leases-and-fencing.md): the node owning the instance's session answers;
      // routes never know. A gateway request, verified here, goes to the owner as its /v1 twin (its x-instance-id
      // names the instance there). A route declaring `anyNode` is served here.
      if (request.routeOptions.config?.anyNode) return undefined;
      const repeatable = request.routeOptions.config?.repeatable === true;
      if (cluster && (await routeInstanceRequest(cluster, request, reply, request.instance, { repeatable })))
        return reply;
      return undefined;
    };
    // Routes without an instance pass it without waiting: callback style (src/http/hook-style.ts).
    app.addHook(
      'preHandler',
      callbackHook((request, reply) => {
        const where = request.routeOptions.config?.instance;
        return where === undefined ? undefined : resolve(request, reply, where);
      }),
    );
  },
  { name: 'parley-instance', dependencies: ['parley-auth', 'parley-services'] },
);
