import { type AddressInfo, createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import type { Handlers } from '../lib/ipc.ts';

/**
 * A network between parley and its PostgreSQL server (`--pg-delay=MS`), in a process of its own so its timers
 * neither slow nor are slowed by the load generator: a TCP proxy on 127.0.0.1 that hands every chunk on after a
 * delay, each direction on its own, in order. A delay of D ms makes a round trip of about 2·D plus the timers'
 * granularity (Node's timers fire on whole milliseconds): 0.5 gives about 2.5 ms, which `select 1` measures (the
 * runner logs it).
 */

let server: Server | undefined;
const sockets = new Set<Socket>();

/** Hands what `from` sends to `to` `delayMs` later, in order; ends `to` after the last of it. */
function relay(from: Socket, to: Socket, delayMs: number): void {
  from.on('data', (chunk: Buffer) => {
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, delayMs);
  });
  from.on('end', () => setTimeout(() => to.end(), delayMs));
}

export const networkHandlers: Handlers = {
  /** Listens on a free port, forwarding to `target` (`host`, `port`) with `delayMs` each way. → `{ port }`. */
  async start(args) {
    const { host, port, delayMs } = args as { host: string; port: number; delayMs: number };
    server = createServer((client) => {
      const upstream = tcpConnect(port, host);
      for (const socket of [client, upstream]) {
        socket.setNoDelay(true);
        sockets.add(socket);
        socket.on('error', () => socket.destroy());
        socket.on('close', () => sockets.delete(socket));
      }
      relay(client, upstream, delayMs);
      relay(upstream, client, delayMs);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    const listening = server;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    return { port: (listening.address() as AddressInfo).port };
  },
  async close() {
    for (const socket of sockets) socket.destroy();
    const listening = server;
    if (listening) await new Promise<void>((resolve) => listening.close(() => resolve()));
    return null;
  },
};
