import type { IncomingMessage } from 'node:http';

/**
 * One path of the alternate gateway form (docs/gateway.md; docs/decisions/0021-gateway-form.md) and its `/v1` twin.
 * The instance is the one `x-instance-id` names, handed to the twin's handler as is (plugins/instance.ts);
 * `textBody` marks the text send, whose gateway body names the text `message` instead of `body`.
 */
export interface GatewayRoute {
  method: 'GET' | 'POST';
  /** The gateway path, without query (e.g. `/chat/send/text`). */
  path: string;
  /** The `/v1` twin the request is served by (e.g. `/v1/messages/send`). */
  twin: string;
  textBody: boolean;
}

const sends = ['image', 'document', 'audio', 'video', 'location', 'contact', 'sticker'] as const;

const route = (
  method: GatewayRoute['method'],
  path: string,
  twin: string,
  textBody = false,
): GatewayRoute => ({ method, path, twin, textBody });

/**
 * Every gateway path (docs/decisions/0021-gateway-form.md table, plus the poll, edit, delete and presence paths of
 * the same family), in the order the documentation lists them.
 */
export const GATEWAY_ROUTES: readonly GatewayRoute[] = [
  route('POST', '/chat/send/text', '/v1/messages/send', true),
  ...sends.map((kind) => route('POST', `/chat/send/${kind}`, `/v1/messages/send/${kind}`)),
  route('POST', '/chat/send/poll', '/v1/messages/send/poll'),
  route('POST', '/chat/send/edit', '/v1/messages/edit'),
  route('POST', '/chat/delete', '/v1/messages/delete'),
  route('POST', '/chat/presence', '/v1/chats/presence'),
  route('POST', '/user/check', '/v1/contacts/check'),
  route('GET', '/user/contacts', '/v1/contacts/list'),
  route('GET', '/user/info', '/v1/contacts/info'),
  route('GET', '/user/avatar', '/v1/contacts/avatar'),
  route('GET', '/session/status', '/v1/session/status'),
  route('GET', '/session/qr', '/v1/session/qr'),
  route('POST', '/session/connect', '/v1/session/connect'),
  route('POST', '/session/disconnect', '/v1/session/disconnect'),
  route('POST', '/session/logout', '/v1/session/logout'),
  route('GET', '/group/list', '/v1/groups/list'),
  route('GET', '/group/info', '/v1/groups/info'),
  route('POST', '/group/create', '/v1/groups/create'),
  route('GET', '/group/invitelink', '/v1/groups/invite-link'),
];

const byKey = new Map(GATEWAY_ROUTES.map((r) => [`${r.method} ${r.path}`, r]));
const marked = new WeakMap<IncomingMessage, GatewayRoute>();

/**
 * Fastify's `rewriteUrl` server option (runs before routing): a gateway path with its method is served by its
 * `/v1` twin, the query kept; the raw request is marked so {@link gatewayRouteOf} knows it came through the
 * gateway. Any other URL (including a gateway path with the wrong method, which then answers 404 under its own
 * path) is returned unchanged.
 */
export function rewriteGatewayUrl(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const queryAt = url.indexOf('?');
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  const match = byKey.get(`${req.method ?? 'GET'} ${path}`);
  if (!match) return url;
  marked.set(req, match);
  return queryAt === -1 ? match.twin : `${match.twin}${url.slice(queryAt)}`;
}

/** The gateway route a raw request came through, or undefined for a plain `/v1` (or other) request. */
export function gatewayRouteOf(req: IncomingMessage): GatewayRoute | undefined {
  return marked.get(req);
}
