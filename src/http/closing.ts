import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * How a closing node lets go of its connections (docs/decisions/0064-closing-connections.md). Node's
 * `server.close()` stops listening, ends the connections it counts as idle, and waits for every other one
 * (Node.js documentation, `server.close()`, `server.closeIdleConnections()`). Its own idea of idle both misses
 * connections and cuts some, so this replaces it on the app's server:
 * - a connection that has sent no request yet (a browser's speculative connection, a client's spare one), or only
 *   part of one, is not idle to Node, and once the server is closing nothing times it out. Connections that have
 *   read no byte are ended when the app starts closing, connections opened after that at once, and the rest of
 *   those that owe no answer when the server closes;
 * - a connection whose response Node counts as done (ended) may still have bytes to send to a slow reader: Node
 *   would destroy it and cut the answer. Here a connection is let go of only once every request it carried has been
 *   answered (its response closed), and by writing its end after what it still has to send;
 * - a connection whose last answer goes out after the close began would stay kept alive until the client's or the
 *   server's keep-alive timeout (72 s, Fastify's default): it is let go of as soon as that answer is out.
 * A request pipelined behind one in flight is still answered; one the client sends just as its kept-alive
 * connection is let go of is not, and the client retries it, as after any keep-alive close (RFC 9112 §9.3).
 * Upgraded connections (WebSocket) are left to their own close (1001). Plain HTTP only: on TLS the connection's
 * socket is not the request's. → whether the app is closing: the caller answers a request arriving then 503
 * `not_ready` with `Connection: close` (RFC 9112 §9.6), and the client retries on a node that serves.
 */
export function addClosingHooks(app: FastifyInstance): () => boolean {
  let closing = false;
  /** Every open connection of the server (each leaves at its close). */
  const connections = new Set<Socket>();
  /** Requests received on a connection and not yet answered (its response not closed). */
  const unanswered = new Map<Socket, number>();
  /** Connections handed to WebSocket by an upgrade. */
  const upgraded = new WeakSet<Socket>();
  /** Writes the end of `socket` after what it still has to send, then closes it. */
  const release = (socket: Socket): void => {
    if (socket.destroyed || upgraded.has(socket)) return;
    if (socket.writableEnded) return;
    socket.once('finish', () => socket.destroy());
    socket.end();
  };
  const owesNothing = (socket: Socket): boolean => (unanswered.get(socket) ?? 0) === 0;
  const server = app.server;
  server.on('connection', (socket: Socket) => {
    // Opened while closing: no request of it can be served any more.
    if (closing) {
      socket.destroy();
      return;
    }
    connections.add(socket);
    socket.once('close', () => {
      connections.delete(socket);
      unanswered.delete(socket);
    });
  });
  server.on('upgrade', (_request: IncomingMessage, socket: Socket) => {
    upgraded.add(socket);
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as Socket;
    // An upgrade request that is not a WebSocket one is served as plain HTTP on its connection (src/http/websocket.ts).
    upgraded.delete(socket);
    unanswered.set(socket, (unanswered.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const count = unanswered.get(socket);
      // The connection closed first (the client left): it is forgotten already.
      if (count === undefined) return;
      unanswered.set(socket, count - 1);
      if (closing && count - 1 === 0) release(socket);
    });
  });
  // Called by `server.close()` (Node's own version destroys connections whose answer is still being written).
  server.closeIdleConnections = () => {
    for (const socket of connections) if (owesNothing(socket)) release(socket);
  };
  app.addHook('preClose', async () => {
    closing = true;
    for (const socket of connections) {
      // No byte read: no request begun, nothing to answer.
      if (socket.bytesRead === 0) socket.destroy();
    }
  });
  return () => closing;
}
