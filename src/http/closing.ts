import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * How a closing node lets go of its connections (docs/decisions/0064-closing-connections.md). Node's
 * `server.close()` stops listening, ends the keep-alive connections idle at that moment and waits for every other
 * one (Node.js documentation, `server.close()`, `server.closeIdleConnections()`). Two kinds would make it wait long
 * past the stop's budget (`SHUTDOWN_TIMEOUT_SECONDS`), and are ended here:
 * - a connection that has not sent a request yet (a browser's speculative connection, a client's spare one): Node
 *   counts it as waiting for its first request's headers and keeps it until `headersTimeout` (60 s). It is ended
 *   when the app starts closing;
 * - a connection whose answer is sent after the close began: kept alive after it, it would wait for the client's
 *   keep-alive timeout. Once such an answer is out, the connections idle then are ended; a request already
 *   pipelined behind it is still answered (503 with `Connection: close`, RFC 9112 §9.6).
 * → whether the app is closing: the caller answers a request that arrives then 503 `not_ready` with
 * `Connection: close`, and the client retries on a node that serves.
 */
export function addClosingHooks(app: FastifyInstance): () => boolean {
  let closing = false;
  /** Every open connection of the server (each leaves at its close). */
  const connections = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  app.addHook('preClose', async () => {
    closing = true;
    for (const socket of connections) {
      // No byte read: no request begun, nothing to answer.
      if (socket.bytesRead === 0) socket.destroy();
    }
  });
  // Runs on every request and never waits: callback style, no promise each. A connection whose last answer went out
  // after the close began is idle now (Node ends only those idle when `close()` is called).
  app.addHook('onResponse', (_request, _reply, done) => {
    if (closing) app.server.closeIdleConnections();
    done();
  });
  return () => closing;
}
