import type { ServerResponse } from 'node:http';

/**
 * Ends `raw`, a long-lived streamed answer (server-sent events) whose reply was hijacked, with `last` as its final
 * chunk, and then ends its connection, for a server that is closing. Node's `server.close()` ends the connections
 * idle at that moment and waits for the others; a stream ended by a `preClose` hook is still finishing then, and its
 * connection, kept alive after the answer, would hold the close until the client's or the server's keep-alive
 * timeout. Ending the connection once the answer is out lets the server close at once, whichever of the `preClose`
 * hooks runs first (src/http/closing.ts does the same for every answer once it knows the app is closing); the client
 * reconnects to a node that serves (docs/decisions/0064-closing-connections.md; Node.js documentation,
 * `server.close()`).
 */
export function endStreamForClose(raw: ServerResponse, last?: string): void {
  // Read now: the response lets go of its socket once it has finished.
  const socket = raw.socket;
  if (raw.writableEnded || raw.destroyed) {
    socket?.end();
    return;
  }
  raw.end(last ?? '', () => socket?.end());
}
