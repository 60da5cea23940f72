import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'undici';
import {
  OutboundChannel,
  OutboundError,
  OutboundGuard,
  type OutboundRequest,
} from '../../src/net/outbound-guard.ts';
import type { PooledClient } from '../../src/net/outbound-pool.ts';
import { eventually } from '../support/eventually.ts';
import { TEST_CA } from '../support/https-receiver.ts';
import { guardResolving, guardWithMovingName, startLoopbackPair } from '../support/loopback-pair.ts';

const POST: OutboundRequest = {
  method: 'POST',
  timeoutMs: 10_000,
  maxResponseBytes: 1024,
  onTooLarge: 'truncate',
};

/**
 * Issues one request per body on `channel`, in order; each settles to its status (`'200'`) or its
 * OutboundError's reason (`'dns'`, `'timeout'`, `'connect'`…).
 */
function issue(
  guard: OutboundGuard,
  url: string,
  channel: OutboundChannel,
  bodies: readonly string[],
  timeoutMs: (body: string) => number = () => POST.timeoutMs,
): Promise<string>[] {
  return bodies.map((body) =>
    guard.request(url, { ...POST, timeoutMs: timeoutMs(body), body, channel }).then(
      (response) => `${response.status}`,
      (error: unknown) => (error instanceof OutboundError ? error.reason : 'error'),
    ),
  );
}

/**
 * Runs `body` with a guard that allows 127.0.0.1, the URL of `port`'s `/hook` by that address and a new channel of
 * depth 3; then closes the channel (if `body` did not) and the guard.
 */
async function onLocalChannel(
  port: number,
  body: (guard: OutboundGuard, url: string, channel: OutboundChannel) => Promise<void>,
): Promise<void> {
  const guard = new OutboundGuard({ allowedCidrs: ['127.0.0.1/32'], ca: TEST_CA });
  const channel = new OutboundChannel(3);
  try {
    await body(guard, `https://127.0.0.1:${port}/hook`, channel);
    channel.close();
  } finally {
    await guard.close();
  }
}

/**
 * Sends one request, `warm-up`, on `channel` and answers it: a channel writes one request at a time until an answer
 * showed its receiver keeps connections open. Forgets its arrival, so a test's arrivals are its own requests.
 */
async function warmUp(
  guard: OutboundGuard,
  url: string,
  channel: OutboundChannel,
  server: { arrivals: Arrival[]; answer: (body: string) => void },
): Promise<void> {
  const warm = guard.request(url, { ...POST, body: 'warm-up', channel });
  await eventually('the warm-up arrived', () =>
    server.arrivals.some((arrival) => arrival.body === 'warm-up'),
  );
  server.answer('warm-up');
  assert.equal((await warm).status, 200);
  server.arrivals.length = 0;
}

/** One request as the server got it: its body, the client's port (which connection) and the local address. */
interface Arrival {
  body: string;
  remotePort: number;
  localAddress: string;
  socket: Socket;
  res: ServerResponse;
}

/**
 * An HTTPS server on 127.0.0.1 and 127.0.0.2 (same port) that records every request in arrival order and holds
 * its answer until the test sends it (`answer`), counting TLS handshakes.
 */
async function holdingServer(): Promise<{
  port: number;
  arrivals: Arrival[];
  handshakes: () => number;
  answer: (body: string, status?: number) => void;
  close(): Promise<void>;
}> {
  const arrivals: Arrival[] = [];
  let handshakes = 0;
  const pair = await startLoopbackPair(
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () =>
        arrivals.push({
          body: Buffer.concat(chunks).toString(),
          remotePort: req.socket.remotePort ?? 0,
          localAddress: req.socket.localAddress ?? '',
          socket: req.socket,
          res,
        }),
      );
    },
    () => {
      handshakes += 1;
    },
  );
  return {
    port: pair.port,
    arrivals,
    handshakes: () => handshakes,
    answer: (body, status = 200) => {
      const arrival = arrivals.find((candidate) => candidate.body === body);
      assert.ok(arrival, `request ${body} arrived`);
      arrival.res.writeHead(status, { 'content-type': 'text/plain' }).end(`answer ${body}`);
    },
    close: pair.close,
  };
}

describe('ordered outbound channels (docs/decisions/0058-pipelined-lanes.md)', () => {
  let server: Awaited<ReturnType<typeof holdingServer>>;
  before(async () => {
    server = await holdingServer();
  });
  after(() => server.close());

  it("writes a channel's requests on one connection in the order issued, even when their lookups end in another order", async () => {
    server.arrivals.length = 0;
    const handshakesBefore = server.handshakes();
    let lookups = 0;
    const guard = new OutboundGuard({
      allowedCidrs: ['127.0.0.1/32'],
      ca: TEST_CA,
      // After the warm-up's, each lookup answers sooner than the one before it: the first request is resolved last.
      lookup: async () => {
        lookups += 1;
        const delayMs = 75 - lookups * 15;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, delayMs)));
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    try {
      const url = `https://localhost:${server.port}/hook`;
      const channel = new OutboundChannel(3);
      await warmUp(guard, url, channel, server);
      const answers = ['1', '2', '3'].map((body) => guard.request(url, { ...POST, body, channel }));
      await eventually('three requests written before any answer', () => server.arrivals.length === 3);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3'],
        'arrival order is issue order',
      );
      assert.equal(new Set(server.arrivals.map((arrival) => arrival.remotePort)).size, 1, 'one connection');
      assert.equal(server.handshakes() - handshakesBefore, 1, 'one TLS handshake, the warm-up included');
      // A fourth, issued while three are unanswered, goes on the same connection.
      const fourth = guard.request(url, { ...POST, body: '4', channel });
      for (const body of ['1', '2', '3']) server.answer(body);
      const settled = await Promise.all(answers);
      assert.deepEqual(
        settled.map((response) => [response.status, response.body.toString()]),
        [
          [200, 'answer 1'],
          [200, 'answer 2'],
          [200, 'answer 3'],
        ],
      );
      await eventually('the fourth written', () => server.arrivals.length === 4);
      server.answer('4');
      assert.equal((await fourth).status, 200);
      assert.equal(server.arrivals[3]?.remotePort, server.arrivals[0]?.remotePort, 'on the same connection');
      assert.equal(lookups, 5, 'every request resolved and checked its host');

      channel.close();
      assert.equal(guard.idleConnections, 1, 'the closed channel gave its connection back to the pool');
      const plain = guard.request(url, { ...POST, body: '5' });
      await eventually('a request after the channel', () => server.arrivals.length === 5);
      server.answer('5');
      assert.equal((await plain).status, 200);
      assert.equal(
        server.arrivals[4]?.remotePort,
        server.arrivals[0]?.remotePort,
        'the pooled connection reused',
      );
    } finally {
      await guard.close();
    }
  });

  it('a request whose host now resolves elsewhere gets a connection of its own; the old one ends its requests', async () => {
    server.arrivals.length = 0;
    const { guard } = guardWithMovingName(2);
    try {
      const url = `https://localhost:${server.port}/hook`;
      const channel = new OutboundChannel(4);
      const answers = ['1', '2', '3'].map((body) => guard.request(url, { ...POST, body, channel }));
      // Neither receiver has answered yet, so each connection carries one request at a time.
      await eventually('two requests arrived', () => server.arrivals.length === 2);
      // On two connections, 3 may arrive before 1: only a channel's one connection keeps the order.
      assert.deepEqual(
        server.arrivals
          .map((arrival) => [arrival.body, arrival.localAddress])
          .sort(([a], [b]) => String(a).localeCompare(String(b))),
        [
          ['1', '127.0.0.1'],
          ['3', '127.0.0.2'],
        ],
      );
      for (const body of ['3', '1']) server.answer(body);
      await eventually('the second written once the first was answered', () => server.arrivals.length === 3);
      assert.deepEqual(server.arrivals[2]?.localAddress, '127.0.0.1');
      server.answer('2');
      assert.deepEqual(
        (await Promise.all(answers)).map((response) => response.address),
        ['127.0.0.1', '127.0.0.1', '127.0.0.2'],
      );
      assert.equal(guard.idleConnections, 1, 'the replaced connection went back to the pool once idle');
      channel.close();
      assert.equal(guard.idleConnections, 2);
    } finally {
      await guard.close();
    }
  });

  it('a connection lost under a pipeline fails the request at its head and sends the ones behind it again', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      const answers = issue(guard, url, channel, ['1', '2', '3']);
      await eventually('three requests arrived', () => server.arrivals.length === 3);
      server.answer('1');
      assert.equal(await answers[0], '200');
      server.arrivals[1]?.socket.destroy();
      await eventually(
        'request 3 sent again',
        () => server.arrivals.filter((a) => a.body === '3').length === 2,
      );
      const again = server.arrivals.at(-1);
      assert.ok(again);
      assert.notEqual(again.remotePort, server.arrivals[0]?.remotePort, 'on a new connection');
      again.res.writeHead(200).end('again');
      assert.deepEqual(await Promise.all(answers), ['200', 'connect', '200']);
    });
  });

  it('a request that fails before its turn lets no later one overtake an earlier one', async () => {
    server.arrivals.length = 0;
    let lookups = 0;
    const guard = new OutboundGuard({
      allowedCidrs: ['127.0.0.1/32'],
      ca: TEST_CA,
      // After the warm-up's, the first lookup is slow, the second is refused, the third answers at once.
      lookup: async (hostname) => {
        lookups += 1;
        if (lookups === 3) throw Object.assign(new Error(`${hostname} not found`), { code: 'ENOTFOUND' });
        if (lookups === 2) await new Promise((resolve) => setTimeout(resolve, 150));
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    try {
      const url = `https://localhost:${server.port}/hook`;
      const channel = new OutboundChannel(3);
      await warmUp(guard, url, channel, server);
      const answers = issue(guard, url, channel, ['1', '2', '3']);
      await eventually('two requests arrived', () => server.arrivals.length === 2);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '3'],
        'the third waited for the first',
      );
      server.answer('1');
      server.answer('3');
      assert.deepEqual(await Promise.all(answers), ['200', 'dns', '200']);
      channel.close();
    } finally {
      await guard.close();
    }
  });

  it('an answer longer than the cap is read to its end: nothing behind it is written again', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      const answers = ['1', '2', '3'].map((body) => guard.request(url, { ...POST, body, channel }));
      await eventually('three requests arrived', () => server.arrivals.length === 3);
      // 64 KB: several TLS records, so the cap is passed before the answer's end has arrived.
      server.arrivals[0]?.res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(65_536));
      server.answer('2');
      server.answer('3');
      const [first, second, third] = await Promise.all(answers);
      assert.equal(first?.truncated, true);
      assert.equal(first?.body.length, POST.maxResponseBytes);
      assert.equal(second?.body.toString(), 'answer 2');
      assert.equal(third?.body.toString(), 'answer 3');
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3'],
        'each request received once',
      );
      assert.equal(new Set(server.arrivals.map((arrival) => arrival.remotePort)).size, 1);
      channel.close();
      assert.equal(guard.idleConnections, 1, 'the connection is still good');
    });
  });

  it('a request that times out fails the ones written behind it instead of writing them again', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      // The first has 500 ms, the two behind it 10 s: they end when the first times out, not on their own.
      const answers = issue(guard, url, channel, ['1', '2', '3'], (body) => (body === '1' ? 500 : 10_000));
      assert.deepEqual(await Promise.all(answers), ['timeout', 'connect', 'connect']);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3'],
        'each request received once',
      );
      // The channel's next request goes on a new connection.
      const next = guard.request(url, { ...POST, body: '4', channel });
      await eventually('the fourth arrived', () => server.arrivals.length === 4);
      server.answer('4');
      assert.equal((await next).status, 200);
      assert.notEqual(server.arrivals[3]?.remotePort, server.arrivals[0]?.remotePort);
    });
  });

  /** Answers the latest arrival of `body` with a 200 whose connection the server closes after it. */
  const answerAndClose = (body: string) => {
    const arrival = server.arrivals.findLast((candidate) => candidate.body === body);
    assert.ok(arrival, `request ${body} arrived`);
    arrival.res.writeHead(200, { 'content-type': 'text/plain', connection: 'close' }).end(`answer ${body}`);
  };
  const arrivalsOf = (body: string) => server.arrivals.filter((arrival) => arrival.body === body).length;

  it('a receiver that closes its connection after each answer gets each request once, one at a time', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      // Nothing is known of this receiver yet: the channel writes one request and waits for its answer.
      const answers = issue(guard, url, channel, ['1', '2', '3']);
      for (const body of ['1', '2', '3']) {
        await eventually(`request ${body} arrived`, () => arrivalsOf(body) === 1);
        assert.equal(server.arrivals.length, Number(body), 'no request written behind an unanswered one');
        answerAndClose(body);
      }
      assert.deepEqual(await Promise.all(answers), ['200', '200', '200']);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3'],
        'each request received once',
      );
      assert.equal(
        new Set(server.arrivals.map((arrival) => arrival.remotePort)).size,
        3,
        'a connection each',
      );
    });
  });

  it('a connection closed by its answer under a pipeline: the requests behind go again one at a time, at most twice', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      const answers = issue(guard, url, channel, ['1', '2', '3']);
      await eventually('three requests arrived', () => server.arrivals.length === 3);
      // From here on every answer closes its connection.
      answerAndClose('1');
      await eventually('request 2 written again', () => arrivalsOf('2') === 2);
      assert.equal(arrivalsOf('3'), 1, 'request 3 waits behind request 2 instead of being written with it');
      answerAndClose('2');
      await eventually('request 3 written again', () => arrivalsOf('3') === 2);
      answerAndClose('3');
      assert.deepEqual(await Promise.all(answers), ['200', '200', '200']);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3', '2', '3'],
        'the two behind the closing answer received twice, no more',
      );
      // The channel stays one request at a time, even where the receiver keeps its connection again.
      const fourth = guard.request(url, { ...POST, body: '4', channel });
      const fifth = guard.request(url, { ...POST, body: '5', channel });
      await eventually('the fourth arrived', () => arrivalsOf('4') === 1);
      assert.equal(arrivalsOf('5'), 0, 'the fifth waits for the answer to the fourth');
      server.answer('4');
      await eventually('the fifth arrived', () => arrivalsOf('5') === 1);
      server.answer('5');
      assert.deepEqual([(await fourth).status, (await fifth).status], [200, 200]);
    });
  });

  it('a request behind others counts its time from the answer before it, as one request at a time would', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      // 400 ms each; the receiver answers one after the other, 250 ms apart: 750 ms for the third.
      const answers = issue(guard, url, channel, ['1', '2', '3'], () => 400);
      await eventually('three requests arrived', () => server.arrivals.length === 3);
      for (const body of ['1', '2', '3']) {
        await sleep(250);
        server.answer(body);
      }
      assert.deepEqual(await Promise.all(answers), ['200', '200', '200']);
    });
  });

  it('an answer whose dropped rest is not read in time keeps its status; the requests behind it fail', async () => {
    server.arrivals.length = 0;
    await onLocalChannel(server.port, async (guard, url, channel) => {
      await warmUp(guard, url, channel, server);
      const first = guard.request(url, { ...POST, body: '1', channel, timeoutMs: 500 });
      const behind = issue(guard, url, channel, ['2']);
      await eventually('two requests arrived', () => server.arrivals.length === 2);
      // Past the kept 1,024 bytes, and the answer never ends.
      server.arrivals[0]?.res.writeHead(200, { 'content-type': 'text/plain' }).write('x'.repeat(4_096));
      const answer = await first;
      assert.deepEqual(
        [answer.status, answer.truncated, answer.body.length],
        [200, true, POST.maxResponseBytes],
      );
      assert.deepEqual(await Promise.all(behind), ['connect'], 'its connection closed under the one behind');
      // The channel's next request goes on a new connection, one at a time.
      const next = guard.request(url, { ...POST, body: '3', channel });
      await eventually('the third arrived', () => arrivalsOf('3') === 1);
      server.answer('3');
      assert.equal((await next).status, 200);
      assert.notEqual(server.arrivals.at(-1)?.remotePort, server.arrivals[0]?.remotePort);
    });
  });

  it('keeps its connection while the resolver rotates the same addresses', async () => {
    server.arrivals.length = 0;
    const { guard } = guardResolving((lookup) =>
      lookup % 2 === 1 ? ['127.0.0.1', '127.0.0.2'] : ['127.0.0.2', '127.0.0.1'],
    );
    try {
      const url = `https://localhost:${server.port}/hook`;
      const channel = new OutboundChannel(4);
      await warmUp(guard, url, channel, server);
      const answers = ['1', '2', '3', '4'].map((body) => guard.request(url, { ...POST, body, channel }));
      await eventually('four requests arrived', () => server.arrivals.length === 4);
      assert.deepEqual(
        server.arrivals.map((arrival) => arrival.body),
        ['1', '2', '3', '4'],
      );
      assert.equal(new Set(server.arrivals.map((arrival) => arrival.remotePort)).size, 1, 'one connection');
      for (const body of ['1', '2', '3', '4']) server.answer(body);
      await Promise.all(answers);
      channel.close();
    } finally {
      await guard.close();
    }
  });

  it('never writes on a connection again once it was closed for a time-out, and gives each back once', () => {
    const destroyed: string[] = [];
    const givenBack: [string, boolean][] = [];
    let opened = 0;
    const open = (): PooledClient => {
      opened += 1;
      const key = `c${opened}`;
      // Only what the channel touches: the pipelining depth, destroy and the `disconnect` listener.
      const client = {
        pipelining: 1,
        destroy: async () => {
          destroyed.push(key);
        },
        on: () => client,
        off: () => client,
      } as unknown as Client;
      return {
        key: 'origin|127.0.0.1',
        client,
        pinned: { address: '' },
        dialer: new AbortController(),
        idleSince: 0,
        keepsAlive: true,
      };
    };
    const names = new Map<PooledClient, string>();
    const giveBack = (pooled: PooledClient, reusable: boolean) => {
      givenBack.push([names.get(pooled) ?? '?', reusable]);
    };
    const channel = new OutboundChannel(4);
    const first = channel.acquire('origin|127.0.0.1', open, giveBack);
    names.set(first.pooled, 'c1');
    const firstAgain = channel.acquire('origin|127.0.0.1', open, giveBack);
    assert.equal(firstAgain.pooled, first.pooled, 'the same key shares the connection');
    assert.equal(first.pooled.client.pipelining, 4, 'a receiver known to keep connections gets the depth');
    channel.discard(first.pooled, new Error('an earlier request timed out'));
    assert.deepEqual(destroyed, ['c1']);
    const second = channel.acquire('origin|127.0.0.1', open, giveBack);
    names.set(second.pooled, 'c2');
    assert.notEqual(second.pooled, first.pooled, 'a request after the time-out gets a new connection');
    channel.release(first, false);
    assert.deepEqual(givenBack, [], 'given back only once its last request ended');
    channel.release(firstAgain, false);
    assert.deepEqual(givenBack, [['c1', false]]);
    channel.close();
    channel.release(second, true);
    assert.deepEqual(givenBack, [
      ['c1', false],
      ['c2', true],
    ]);
    assert.equal(second.pooled.client.pipelining, 1, 'back in the pool one request at a time');
  });

  it('takes a depth from 1 to 128 and refuses one outside', () => {
    assert.equal(new OutboundChannel(128).depth, 128);
    assert.throws(() => new OutboundChannel(0), RangeError);
    assert.throws(() => new OutboundChannel(129), RangeError);
    assert.throws(() => new OutboundChannel(1.5), RangeError);
  });
});
