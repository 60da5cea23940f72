import { createServer, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of `target`, counting the client's flights: bytes the client sends after the
 * server last spoke (or first on a connection). A client that waits for each answer before its next message flies
 * once per round trip, so the count is the round trips the client made, whatever the segments' sizes.
 */
export interface FlightProxy {
  /** The port it listens on. */
  port: number;
  /** Flights counted on every connection since start or the last {@link reset}. */
  flights(): number;
  /** Starts the count again at 0. */
  reset(): void;
  /**
   * Every connection open now stops forwarding, both ways, and is neither answered nor closed: a server whose host
   * went silent (a failover to another host, a network cut). Connections made after forward as before.
   */
  freeze(): void;
  /**
   * The next connection whose client sends bytes holding `text` (its first statement of that text, say) freezes at
   * that instant, as {@link freeze} does, without forwarding them: a server that went silent between a client's
   * connection and its first answer. Once only; later connections forward as before.
   */
  freezeAt(text: string): void;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

/**
 * Starts a {@link FlightProxy} forwarding to `target` (`host:port`).
 * @throws when it cannot listen.
 */
export async function startFlightProxy(target: { host: string; port: number }): Promise<FlightProxy> {
  let flights = 0;
  const sockets = new Set<Socket>();
  const frozen = new Set<Socket>();
  let freezeAt: Buffer | undefined;
  const server = createServer((client) => {
    const upstream = tcpConnect(target.port, target.host);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      sockets.add(socket);
      socket.on('close', () => {
        sockets.delete(socket);
        frozen.delete(socket);
      });
      socket.on('error', () => undefined);
    }
    let serverSpokeLast = true;
    client.on('data', (chunk: Buffer) => {
      if (frozen.has(client)) return;
      if (freezeAt !== undefined && chunk.includes(freezeAt)) {
        freezeAt = undefined;
        frozen.add(client);
        frozen.add(upstream);
        return;
      }
      if (serverSpokeLast) flights += 1;
      serverSpokeLast = false;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (frozen.has(upstream)) return;
      serverSpokeLast = true;
      client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    port: address.port,
    flights: () => flights,
    reset: () => {
      flights = 0;
    },
    freeze: () => {
      // What either side sends from now on is read and dropped: nothing reaches the other side, nothing is closed.
      for (const socket of sockets) frozen.add(socket);
    },
    freezeAt: (text) => {
      freezeAt = Buffer.from(text);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
