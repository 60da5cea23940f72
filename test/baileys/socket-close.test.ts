import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SocketConfig } from 'baileys';
import { WebSocketClient } from 'baileys/lib/Socket/Client/websocket.js';
import { type WebSocket, WebSocketServer } from 'ws';
import { boundCloseHandshake, endSocket, type SocketLike } from '../../src/engines/baileys/socket.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { until } from './support.ts';

/**
 * How a close of Baileys' WebSocket client is bounded (docs/decisions/0025-live-engine.md), on real sockets: Baileys'
 * own client (Socket/Client/websocket.js) connected through a proxy to a `ws` server. A frozen proxy (nothing
 * forwarded, nothing closed) is a peer that never answers the close frame, which `ws` alone would wait 30 s for.
 */

/** The bound the tests give a close, ms. */
const BOUND_MS = 300;
/** How long a test waits for a close to end: well under the 30 s `ws` waits alone. */
const WAIT_MS = 5_000;
/** The close code a `ws` server reports for a clean close frame without a status, and for a connection cut. */
const CLEAN_CLOSE = 1005;
const CUT = 1006;

describe("a close of Baileys' WebSocket client, bounded", () => {
  let server: WebSocketServer;
  let proxy: FlightProxy;
  /** The close code the server saw for each connection, in the order they closed. */
  const serverCloses: number[] = [];

  before(async () => {
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => server.once('listening', resolve));
    server.on('connection', (ws: WebSocket) => ws.on('close', (code: number) => serverCloses.push(code)));
    const address = server.address();
    assert.ok(typeof address === 'object' && address !== null);
    proxy = await startFlightProxy({ host: '127.0.0.1', port: address.port });
  });
  after(async () => {
    await proxy.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /** A Baileys client connected through the proxy, once open. */
  const openClient = async () => {
    const config = { connectTimeoutMs: WAIT_MS } as unknown as SocketConfig;
    const client = new WebSocketClient(new URL(`ws://127.0.0.1:${proxy.port}`), config);
    client.on('error', () => undefined);
    const seen = serverCloses.length;
    client.connect();
    await until(() => client.isOpen, WAIT_MS, 'the client open');
    return { client, seen };
  };
  /** Runs `close` and waits at most {@link WAIT_MS} for it to end; @returns how long it took, ms. */
  const timed = async (close: () => Promise<void>) => {
    const t0 = Date.now();
    let took: number | undefined;
    void close().then(() => {
      took = Date.now() - t0;
    });
    await until(() => took !== undefined, WAIT_MS, 'the close to end');
    return took ?? 0;
  };

  it('a peer that answers: the close ends with a clean closing handshake', async () => {
    const { client, seen } = await openClient();
    boundCloseHandshake(client, BOUND_MS);
    const took = await timed(() => client.close());
    assert.ok(took < BOUND_MS, `answered within a round trip: took ${took} ms`);
    assert.equal(client.isClosed, true);
    await until(() => serverCloses.length > seen, WAIT_MS, 'the server to see the close');
    assert.deepEqual(serverCloses.slice(seen), [CLEAN_CLOSE], 'the server got the close frame');
  });

  it('a frozen peer: the close ends at its bound, the WebSocket destroyed', async () => {
    const { client, seen } = await openClient();
    boundCloseHandshake(client, BOUND_MS);
    proxy.freeze();
    const took = await timed(() => client.close());
    assert.ok(took >= BOUND_MS - 20, `the close frame was given its bound: took ${took} ms`);
    assert.equal(client.isClosed, true);
    await until(() => serverCloses.length > seen, WAIT_MS, 'the server to see the connection cut');
    assert.deepEqual(serverCloses.slice(seen), [CUT]);
  });

  it('endSocket: a close already under way on a frozen peer is ended at the bound', async () => {
    const { client, seen } = await openClient();
    proxy.freeze();
    // An unbounded close, as Baileys' own when its keep-alive ended the connection: its `end` then returns at once.
    const underWay = client.close();
    const sock = { ws: client, end: async () => undefined } as unknown as SocketLike;
    const took = await timed(() => endSocket(sock, BOUND_MS));
    assert.ok(took >= BOUND_MS - 20, `took ${took} ms`);
    assert.equal(client.isClosed, true, 'the WebSocket is closed when endSocket resolves');
    await underWay;
    await until(() => serverCloses.length > seen, WAIT_MS, 'the server to see the connection cut');
    assert.deepEqual(serverCloses.slice(seen), [CUT]);
  });

  it('endSocket with no bound: the WebSocket is destroyed at once, with no close frame', async () => {
    const { client, seen } = await openClient();
    let ended = 0;
    const sock = {
      ws: client,
      end: async () => {
        ended += 1;
        await client.close();
      },
    } as unknown as SocketLike;
    const took = await timed(() => endSocket(sock, 0));
    assert.ok(took < BOUND_MS, `took ${took} ms`);
    assert.equal(ended, 1);
    assert.equal(client.isClosed, true);
    await until(() => serverCloses.length > seen, WAIT_MS, 'the server to see the connection cut');
    assert.deepEqual(serverCloses.slice(seen), [CUT], 'cut, though the peer would have answered');
  });
});
