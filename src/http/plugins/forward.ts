import { randomUUID, timingSafeEqual } from 'node:crypto';
import { addAbortSignal, pipeline, type Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Agent, request as send } from 'undici';
import type { HttpCluster } from '../../app/http-services.ts';
import { DomainError } from '../../domain/errors.ts';
import type { Instance } from '../../domain/instance.ts';

/**
 * Forwarding of instance requests between nodes (docs/decisions/0008-leases-and-fencing.md): a request for an
 * instance whose lease another node holds is sent, whole, to that node's base URL and its answer (status, headers,
 * body) returned unchanged, so the caller sees the same envelope and request id as if this node had served it. Routes
 * know nothing of it: the instance plugin (the API) and the dashboard's instance routing
 * (`routes/dashboard/routing.ts`) call {@link routeInstanceRequest} once the instance is resolved.
 */

/** Header carrying the cluster secret on node-to-node calls. */
export const CLUSTER_SECRET_HEADER = 'x-parley-cluster-secret';
/** Header naming the node that forwarded a request (one hop at most: a forwarded request is never forwarded). */
export const FORWARDED_BY_HEADER = 'x-parley-forwarded-by';
/** Header on a 503 from a node that no longer owns the instance: the forwarder routes again and retries. */
export const NOT_OWNER_HEADER = 'x-parley-not-owner';
/**
 * Header naming one request of a client on every forward of it (a random UUID, the same on each retry): a route
 * declaring `repeatable` does the request's work once per forward id, so the forwarder may send it again after a
 * connection that closed before its answer (docs/decisions/0008-leases-and-fencing.md).
 */
export const FORWARD_ID_HEADER = 'x-parley-forward-id';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** How long a forwarder keeps retrying while the instance changes owner (a dead or draining node), ms. */
export const FORWARD_RETRY_MS = 20_000;

/** Headers not copied between the hops (RFC 9110 §7.6.1 hop-by-hop fields, and the length Fastify sets). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
  'host',
]);

const agent = new Agent({ keepAliveTimeout: 10_000, connections: 64 });

export type { HttpCluster } from '../../app/http-services.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The forward id this request is served under, see {@link forwardIdOf}; null when none. */
    forwardId: string | null;
  }
}

/** Options of {@link routeInstanceRequest}. */
export interface RouteInstanceOptions {
  /**
   * Ends a streamed answer still being relayed when it fires (the node is closing), so the caller reconnects
   * through a node that serves. An answer read whole is not affected: it finishes as any request in flight.
   */
  signal?: AbortSignal;
  /**
   * Served here, the request is not counted as running on the instance: for a long-lived answer (server-sent
   * events), which a hand-over must not wait for.
   */
  untracked?: boolean;
  /**
   * The route does its work once per {@link FORWARD_ID_HEADER} (a send: its job is keyed by it), so a forward whose
   * connection closed before an answer (the owner died, or the connection broke) is sent again, with the same id,
   * within {@link FORWARD_RETRY_MS}. Otherwise such a request answers 503: it may have run.
   */
  repeatable?: boolean;
}

/**
 * Whether `request` came from another node of the cluster: it names a forwarding node and carries the cluster
 * secret (compared in constant time).
 * @throws DomainError unauthenticated when it names a forwarding node with a wrong or missing secret.
 */
export function isForwarded(request: FastifyRequest, cluster: HttpCluster | undefined): boolean {
  if (request.headers[FORWARDED_BY_HEADER] === undefined) return false;
  const given = request.headers[CLUSTER_SECRET_HEADER];
  if (cluster && typeof given === 'string') {
    const a = Buffer.from(given);
    const b = Buffer.from(cluster.secret);
    if (a.length === b.length && timingSafeEqual(a, b)) return true;
  }
  throw new DomainError('unauthenticated', 'node-to-node call without a valid cluster secret');
}

/**
 * Serves `request` here when this node owns `instance` (counting it as running on the instance until answered),
 * or forwards it to the owner and sends the owner's answer. A request forwarded to a node that is not (or no
 * longer) the owner gets 503 with {@link NOT_OWNER_HEADER}; its forwarder routes again and retries for up to
 * {@link FORWARD_RETRY_MS}, as it does when the owner refuses connections (it died or is stopping): such a
 * request never reached a handler, so retrying it cannot run it twice. A connection that closed before an answer
 * is retried the same way only for a `repeatable` route (`options.repeatable`), with the same
 * {@link FORWARD_ID_HEADER}; for others the request may have run and answers 503. An answer of type `text/event-stream` is
 * relayed as it comes (until either side closes); any other is read whole first.
 * @returns true when the reply was sent (forwarded), false when the handler should run here.
 * @throws DomainError unauthenticated (see {@link isForwarded}); not_ready when forwarded here and this node is not
 *   the owner; platform_unreachable when the owner did not answer.
 */
export async function routeInstanceRequest(
  cluster: HttpCluster,
  request: FastifyRequest,
  reply: FastifyReply,
  instance: Instance,
  options: RouteInstanceOptions = {},
): Promise<boolean> {
  const forwarded = isForwarded(request, cluster);
  const deadline = Date.now() + FORWARD_RETRY_MS;
  // A request holding an `Idempotency-Key` claim forwards under the id of the request it continues, so a retry
  // after this node died reaches the job the first forward stored (docs/decisions/0010-idempotency.md).
  const claim = request.idempotency?.claim;
  const forwardId = claim === undefined ? randomUUID() : claim.requestId;
  // GET and HEAD change nothing (RFC 9110 §9.2.2): repeating them is safe too.
  const repeatable = options.repeatable === true || request.method === 'GET' || request.method === 'HEAD';
  /** A forward of this request went out and got no answer: it may have run on the owner under `forwardId`. */
  let tried = false;
  for (;;) {
    const route = await cluster.keeper.route(instance);
    if (route.local) {
      request.forwardId = forwarded ? forwardedId(request) : tried ? forwardId : null;
      if (!options.untracked) {
        const leave = cluster.keeper.enter(instance.id);
        reply.raw.once('close', leave);
      }
      return false;
    }
    if (forwarded) {
      reply.header(NOT_OWNER_HEADER, route.owner);
      throw new DomainError('not_ready', 'the instance is moving between nodes; retry');
    }
    const { owner, url } = route;
    const answer = await whileServing(cluster, instance.id, owner, (signal) =>
      relay(cluster, request, url, forwardId, signal),
    ).catch((error: unknown) => {
      // An owner that stopped serving the instance while its answer was awaited (dead, stopped, cut off) is as a
      // connection that closed: it may have read the request, and will not answer.
      const closed = closedBeforeAnswer(error) || error instanceof OwnerLostError;
      const neverSent = refused(error);
      if (!neverSent) {
        tried = true;
        // Any failure but a refused connection may come after the owner read the request (a closed connection, an
        // answer that timed out or could not be read): the request is served under the forward's id from now on,
        // here or as this error, since it may have run on the owner, so nothing this node answers decides it
        // (src/http/plugins/idempotency.ts).
        request.forwardId = forwardId;
      }
      const again = neverSent || (repeatable && closed);
      if (again && Date.now() < deadline) return undefined;
      throw new DomainError('platform_unreachable', 'the node serving this instance did not answer', {
        cause: error,
      });
    });
    if (answer && !(answer.headers[NOT_OWNER_HEADER] !== undefined && Date.now() < deadline)) {
      reply.code(answer.status);
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value === undefined || HOP_BY_HOP.has(name) || name === NOT_OWNER_HEADER) continue;
        reply.header(name, value);
      }
      if (Buffer.isBuffer(answer.body)) {
        await reply.send(answer.body);
        return true;
      }
      relayStream(reply, answer.status, answer.body, options.signal);
      return true;
    }
    if (answer && !Buffer.isBuffer(answer.body)) answer.body.destroy();
    await sleep(250);
  }
}

/**
 * Relays the owner's streamed answer (`status`, the headers already set on `reply`, then `body` as it comes) to the
 * client, outside Fastify's reply: Fastify counts a reply as sent only once its response has ended, so with a stream
 * still running it would go on to the route's handler, which would then answer a second time on the same response.
 * The relay ends with either side: the owner's stream ending ends the response; the client leaving, or `signal`
 * firing (this node is closing), destroys both, so no connection outlives it and the browser reconnects through a
 * node that serves (docs/decisions/0064-closing-connections.md).
 */
function relayStream(
  reply: FastifyReply,
  status: number,
  body: Readable,
  signal: AbortSignal | undefined,
): void {
  reply.hijack();
  const raw = reply.raw;
  // Destroys the owner's stream when the signal fires (at once when it has already), and lets go of the signal when
  // the stream ends.
  if (signal) addAbortSignal(signal, body);
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) raw.setHeader(name, value);
  }
  raw.writeHead(status);
  // `pipeline` destroys the response when the owner's stream closes before its end, and the owner's stream when
  // the client leaves; a stream ending that way, or by the signal, is not an error to report: any other is logged.
  pipeline(body, raw, (error) => {
    const code = (error as { code?: unknown } | null)?.code;
    if (error && code !== 'ERR_STREAM_PREMATURE_CLOSE' && code !== 'ABORT_ERR')
      reply.log.info({ err: error }, 'a relayed stream ended with an error');
  });
}

/** What a forward is aborted with once its owner stopped serving the instance ({@link whileServing}). */
class OwnerLostError extends Error {
  constructor(owner: string) {
    super(`node ${owner} stopped serving the instance before it answered`);
    this.name = 'OwnerLostError';
  }
}

/**
 * Runs `forward` (a request to node `owner` for instance `instanceId`, read until its answer's headers, or its whole
 * body when not streamed) and aborts it with {@link OwnerLostError} once `owner` stopped serving the instance
 * (`ClusterRouting.ownerLost`: its lease expired, or moved while it is no longer live), so a forward to a node that
 * hangs or vanished without closing its connections ends within about a lease lifetime instead of waiting for an
 * answer that never comes (docs/decisions/0008-leases-and-fencing.md).
 * @throws what `forward` throws; OwnerLostError as above.
 */
async function whileServing<T>(
  cluster: HttpCluster,
  instanceId: string,
  owner: string,
  forward: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const forwarding = new AbortController();
  const answered = new AbortController();
  void cluster.keeper.ownerLost(instanceId, owner, answered.signal).then(() => {
    if (!answered.signal.aborted) forwarding.abort(new OwnerLostError(owner));
  });
  try {
    return await forward(forwarding.signal);
  } finally {
    answered.abort();
  }
}

/** What {@link askNode} fails with when the node asked did not answer within the cluster's ask bound. */
export class NodeAskTimeoutError extends Error {
  constructor(owner: string, ms: number) {
    super(`node ${owner} did not answer within ${ms} ms`);
    this.name = 'NodeAskTimeoutError';
  }
}

/**
 * Sends `request` unchanged (with the cluster headers) to node `node.owner` at base URL `node.url` and returns its
 * answer read whole, for a request that needs a part of its answer from each of several nodes (the dashboard's
 * instance list). The node receiving it sees a forwarded request (see {@link isForwarded}) and answers for itself
 * only. The question is bounded (docs/decisions/0008-leases-and-fencing.md, "A node that does not answer"): it is
 * given up after `cluster.askTimeoutMs` ms, and as a forward is once that node stopped serving `node.instanceId` (an
 * instance it holds: its lease expired, or moved while it is no longer live, `ClusterRouting.ownerLost`), so a node
 * that hangs with its connection open holds the asker no longer than that.
 * @throws NodeAskTimeoutError after the bound; OwnerLostError once the node stopped serving the instance; the
 *   transport's error when the node does not answer otherwise; Error when it answers with a stream.
 */
export async function askNode(
  cluster: HttpCluster,
  request: FastifyRequest,
  node: { owner: string; url: string; instanceId: string },
): Promise<{ status: number; body: Buffer }> {
  const bounded = new AbortController();
  const timer = setTimeout(
    () => bounded.abort(new NodeAskTimeoutError(node.owner, cluster.askTimeoutMs)),
    cluster.askTimeoutMs,
  );
  try {
    const answer = await whileServing(cluster, node.instanceId, node.owner, (lost) =>
      relay(cluster, request, node.url, undefined, AbortSignal.any([bounded.signal, lost])),
    );
    if (!Buffer.isBuffer(answer.body)) {
      answer.body.destroy();
      throw new Error(`${node.url} answered with a stream`);
    }
    return { status: answer.status, body: answer.body };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends `request` to `base` with the cluster headers and returns the answer: in full, or its body as a stream when
 * it is `text/event-stream`. `signal` aborting ends the request (and a streamed body) with its reason.
 */
async function relay(
  cluster: HttpCluster,
  request: FastifyRequest,
  base: string,
  forwardId?: string,
  signal?: AbortSignal,
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer | Readable;
}> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  headers['x-request-id'] = request.id;
  headers[FORWARDED_BY_HEADER] = cluster.keeper.nodeId;
  headers[CLUSTER_SECRET_HEADER] = cluster.secret;
  if (forwardId !== undefined) headers[FORWARD_ID_HEADER] = forwardId;
  else delete headers[FORWARD_ID_HEADER];
  const hasBody =
    request.method !== 'GET' && request.method !== 'HEAD' && headers['content-type'] !== undefined;
  // A gateway request names its instance by x-instance-id only (docs/gateway.md): the owner serves it as its /v1
  // twin, where a query or body `from` would win over the header, so neither is sent on.
  const gateway = request.gateway !== null && request.gateway !== undefined;
  const sent = gateway ? withoutFrom(request.body) : request.body;
  const response = await send(`${base}${gateway ? urlWithoutFrom(request.url) : request.url}`, {
    method: request.method as 'POST',
    headers,
    dispatcher: agent,
    ...(signal ? { signal } : {}),
    ...(hasBody ? { body: JSON.stringify(sent ?? {}) } : {}),
  });
  const type = response.headers['content-type'];
  if (typeof type === 'string' && type.startsWith('text/event-stream')) {
    return { status: response.statusCode, headers: response.headers, body: response.body };
  }
  const body = Buffer.from(await response.body.arrayBuffer());
  return { status: response.statusCode, headers: response.headers, body };
}

/** `url` without its query parameter `from`. */
function urlWithoutFrom(url: string): string {
  const queryAt = url.indexOf('?');
  if (queryAt === -1) return url;
  const query = new URLSearchParams(url.slice(queryAt + 1));
  if (!query.has('from')) return url;
  query.delete('from');
  const rest = query.toString();
  return rest === '' ? url.slice(0, queryAt) : `${url.slice(0, queryAt)}?${rest}`;
}

/** A JSON body without its `from` property (other bodies as they are). */
function withoutFrom(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('from' in body)) return body;
  const { from: _from, ...rest } = body as Record<string, unknown>;
  return rest;
}

/**
 * The forward id a request is served under (see {@link FORWARD_ID_HEADER}), set by {@link routeInstanceRequest}
 * when it lets the handler run here: the id another node forwarded it with (the cluster secret verified, so a
 * client cannot choose it), or this node's own id for it when forwarding it failed and the instance moved here
 * meanwhile. Undefined for any other request.
 */
export function forwardIdOf(request: FastifyRequest): string | undefined {
  return request.forwardId ?? undefined;
}

/** The forward id header of a request another node forwarded, when it is a UUID. */
function forwardedId(request: FastifyRequest): string | null {
  const value = request.headers[FORWARD_ID_HEADER];
  return typeof value === 'string' && UUID.test(value) ? value : null;
}

/**
 * Whether `error` means the connection closed before any answer came: the owner died with the request sent or about
 * to be (a pooled connection its death had closed, not yet noticed), or the connection broke. The request may have
 * run; only a route doing its work once per forward id may send it again.
 */
function closedBeforeAnswer(error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** Whether `error` means the request never reached the other node (connection refused or not yet made). */
function refused(error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  return code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH';
}
