import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * WebSocket in the HTTP app (docs/decisions/0031-event-stream.md), with @fastify/websocket over `ws`: an upgrade
 * request goes through the router and every hook like any request (auth, scope, rate limit, validation, instance),
 * so a refusal is an ordinary answer in the envelope; only a route with a `wsHandler` accepts the upgrade.
 */

/** Largest frame a client may send, bytes: clients of the event stream send nothing but control frames. */
export const MAX_CLIENT_FRAME_BYTES = 4096;

/** Whether `request` asks for a WebSocket (its `Upgrade` header names `websocket`, RFC 6455 §4.1). */
export function isWebSocketUpgrade(request: IncomingMessage): boolean {
  return (request.headers.upgrade ?? '')
    .split(',')
    .some((protocol) => protocol.trim().toLowerCase() === 'websocket');
}

/** Header fields that belong to an upgrade other than WebSocket, left out when it is served as plain HTTP. */
const UPGRADE_FIELDS = /^(upgrade|http2-settings)$/i;

/**
 * Serves an upgrade request for another protocol as the plain HTTP/1.1 request it also is (RFC 9110 §7.8: a server
 * may ignore `Upgrade`). Node hands every upgrade request to the `upgrade` listeners once there is one, parser
 * detached; without this, `Upgrade: h2c`, which curl `--http2` and Java's HttpClient send on `http://` URLs,
 * would be refused on every route. The request's head is written again without its upgrade fields, followed by the
 * bytes already read past it, in front of the socket's data, and the socket handed to the server as a new
 * connection: its parser reads the request (body included) and the ones that follow on the connection.
 */
function serveAsPlainHttp(server: Server, request: IncomingMessage, socket: Duplex, head: Buffer): void {
  const lines = [`${request.method ?? 'GET'} ${request.url ?? '/'} HTTP/${request.httpVersion}`];
  const raw = request.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const value = raw[i + 1] ?? '';
    if (UPGRADE_FIELDS.test(name)) continue;
    if (name.toLowerCase() === 'connection') {
      const kept = value
        .split(',')
        .map((token) => token.trim())
        .filter((token) => token !== '' && !UPGRADE_FIELDS.test(token));
      if (kept.length > 0) lines.push(`${name}: ${kept.join(', ')}`);
      continue;
    }
    lines.push(`${name}: ${value}`);
  }
  socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
}

/**
 * Registers @fastify/websocket on `app` (before any route, so every route's handler is wrapped):
 * - the `upgrade` requests of the HTTP server are dispatched: WebSocket ones to the plugin, others served as plain
 *   HTTP ({@link serveAsPlainHttp});
 * - the 101 of an accepted upgrade carries the headers the hooks set (`x-request-id`, `RateLimit`,
 *   `RateLimit-Policy`, and the route's own: the event stream's `x-instance-id`), as any other answer does;
 * - WebSockets still open when the app closes are closed with 1001 `server shutting down` (the event stream's own
 *   hook says so first, src/http/routes/v1/event-stream.ts).
 */
export async function registerWebSocket(app: FastifyInstance): Promise<void> {
  await app.register(websocket, {
    options: { maxPayload: MAX_CLIENT_FRAME_BYTES },
    preClose(done) {
      for (const client of this.websocketServer.clients) client.close(1001, 'server shutting down');
      done();
    },
  });
  const server = app.server;
  // The plugin's own listener, replaced by the dispatch below (it removes its listener itself when the app closes).
  const plugin = server.listeners('upgrade');
  server.removeAllListeners('upgrade');
  const dispatch = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!isWebSocketUpgrade(request)) return serveAsPlainHttp(server, request, socket, head);
    for (const listener of plugin) Reflect.apply(listener, server, [request, socket, head]);
  };
  server.on('upgrade', dispatch);
  // Closing: no upgrade listener any more, so an upgrade request is served as plain HTTP (the closing 503).
  app.addHook('preClose', async () => {
    server.removeListener('upgrade', dispatch);
  });

  // The reply, not its headers as they are now: the route's own preHandler runs after this one and may set more
  // (the event stream's `x-instance-id`); they are read when the 101 is written, after every hook.
  const upgradeReplies = new WeakMap<IncomingMessage, FastifyReply>();
  // Every request passes it and never waits: callback style, no promise each (src/http/hook-style.ts).
  app.addHook('preHandler', (request, reply, done) => {
    if (request.ws) upgradeReplies.set(request.raw, reply);
    done();
  });
  app.websocketServer.on('headers', (headers: string[], raw: IncomingMessage) => {
    for (const [name, value] of Object.entries(upgradeReplies.get(raw)?.getHeaders() ?? {})) {
      if (value !== undefined) headers.push(`${name}: ${Array.isArray(value) ? value.join(', ') : value}`);
    }
  });
}
