import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * How a closing node lets go of its connections (docs/decisions/0064-closing-connections.md). Node's
 * `server.close()` stops listening, ends the keep-alive connections idle at that moment, and waits for every other
 * one (Node.js documentation, `server.close()`, `server.closeIdleConnections()`). Two kinds would hold it long past
 * the stop's budget (`SHUTDOWN_TIMEOUT_SECONDS`), so they are ended here:
 * - a connection that has sent no request yet (a browser's speculative connection, a client's spare one): Node does
 *   not count it as idle, and once the server is closing nothing times it out; the client alone would end it. It is
 *   ended when the app starts closing, as is a connection opened after that;
 * - a connection whose last answer went out after the close began: kept alive, it would wait for the client's or the
 *   server's keep-alive timeout (72 s, Fastify's default). Once its requests are all answered in full (the last
 *   response closed, its bytes handed to the system), its end is written after them.
 * A request pipelined behind one in flight is still answered: a connection ends only when every request it carried
 * has been. → whether the app is closing: the caller answers a request arriving then 503 `not_ready` with
 * `Connection: close` (RFC 9112 §9.6), and the client retries on a node that serves.
 */
export function addClosingHooks(app: FastifyInstance): () => boolean {
  let closing = false;
  /** Every open connection of the server (each leaves at its close). */
  const connections = new Set<Socket>();
  /** Requests received on a connection and not yet answered in full (an upgraded connection carries none). */
  const unanswered = new Map<Socket, number>();
  /** Writes the end of `socket` after what it still has to send, when it owes no answer. */
  const letGo = (socket: Socket): void => {
    if ((unanswered.get(socket) ?? 0) === 0 && !socket.destroyed) socket.end();
  };
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
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as Socket;
    unanswered.set(socket, (unanswered.get(socket) ?? 0) + 1);
    response.once('close', () => {
      unanswered.set(socket, (unanswered.get(socket) ?? 1) - 1);
      if (closing) letGo(socket);
    });
  });
  app.addHook('preClose', async () => {
    closing = true;
    for (const socket of connections) {
      // No byte read: no request begun, nothing to answer.
      if (socket.bytesRead === 0) socket.destroy();
    }
  });
  return () => closing;
}
