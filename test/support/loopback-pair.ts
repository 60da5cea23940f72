import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { OutboundGuard } from '../../src/net/outbound-guard.ts';
import { TEST_CA, TEST_CERT, TEST_KEY } from './https-receiver.ts';

/**
 * A host name that resolves to one loopback address, then another: one HTTPS handler on 127.0.0.1 and 127.0.0.2
 * with one port, and outbound guards whose lookups answer what the test says, for the checks that a request goes
 * to the address its name resolved to when the guard checked it (src/net/outbound-guard.ts).
 */

/** HTTPS servers on 127.0.0.1 and 127.0.0.2 sharing one port (a host name that resolves to either). */
export interface LoopbackPair {
  port: number;
  /** Closes every connection and both servers. */
  close(): Promise<void>;
}

/**
 * Starts the same HTTPS handler (the test certificate) on 127.0.0.1 and 127.0.0.2 with one port, so a test can
 * make a name resolve to one address or the other; `onHandshake` gets each TLS connection with the address it came in on.
 */
export async function startLoopbackPair(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  onHandshake: (localAddress: string) => void = () => {},
): Promise<LoopbackPair> {
  const servers: Server[] = [];
  let port = 0;
  for (const host of ['127.0.0.1', '127.0.0.2']) {
    const server = createServer({ key: TEST_KEY, cert: TEST_CERT }, handler);
    server.on('secureConnection', (socket: TLSSocket) => onHandshake(socket.localAddress ?? '?'));
    await new Promise<void>((resolve) => server.listen(port, host, () => resolve()));
    port = (server.address() as AddressInfo).port;
    servers.push(server);
  }
  return {
    port,
    close: async () => {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
  };
}

/**
 * An outbound guard that trusts the test certificate and allows both addresses of {@link startLoopbackPair}, whose
 * lookup of any name answers `answer(n)` at its n-th lookup (from 1). `lookups()` counts the lookups made.
 */
export function guardResolving(answer: (lookup: number) => readonly string[]): {
  guard: OutboundGuard;
  lookups: () => number;
} {
  let lookups = 0;
  const guard = new OutboundGuard({
    allowedCidrs: ['127.0.0.1/32', '127.0.0.2/32'],
    ca: TEST_CA,
    lookup: async () => {
      lookups += 1;
      return answer(lookups).map((address) => ({ address, family: 4 as const }));
    },
  });
  return { guard, lookups: () => lookups };
}

/**
 * {@link guardResolving} for a receiver's name that moves: 127.0.0.1 for the first `movesAfter` lookups, 127.0.0.2
 * from then on.
 */
export function guardWithMovingName(movesAfter: number): { guard: OutboundGuard; lookups: () => number } {
  return guardResolving((lookup) => [lookup <= movesAfter ? '127.0.0.1' : '127.0.0.2']);
}
