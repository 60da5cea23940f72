import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OutboundGuard, type OutboundRequest } from '../../src/net/outbound-guard.ts';
import { TEST_CA } from '../support/https-receiver.ts';
import { guardWithMovingName, startLoopbackPair } from '../support/loopback-pair.ts';

const GET: OutboundRequest = {
  method: 'GET',
  timeoutMs: 5_000,
  maxResponseBytes: 1024,
  onTooLarge: 'truncate',
};

/** An HTTPS server on 127.0.0.1 and 127.0.0.2 (same port) counting TLS handshakes per address. */
async function handshakeCounter(): Promise<{
  port: number;
  handshakes: Map<string, number>;
  close(): Promise<void>;
}> {
  const handshakes = new Map<string, number>();
  const pair = await startLoopbackPair(
    (req, res) => {
      const big = req.url === '/big';
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(big ? 'x'.repeat(10_000) : 'ok');
    },
    (local) => handshakes.set(local, (handshakes.get(local) ?? 0) + 1),
  );
  return { port: pair.port, handshakes, close: pair.close };
}

describe('outbound connection reuse (docs/decisions/0020-security-promises.md: still resolved, checked and pinned per request)', () => {
  let target: Awaited<ReturnType<typeof handshakeCounter>>;
  before(async () => {
    target = await handshakeCounter();
  });
  after(() => target.close());

  it('reuses the connection while each request resolves to the same checked addresses', async () => {
    const { guard, lookups } = guardWithMovingName(3);
    try {
      const url = `https://localhost:${target.port}/hook`;
      for (let i = 0; i < 3; i++) assert.equal((await guard.request(url, GET)).address, '127.0.0.1');
      assert.equal(lookups(), 3, 'every request resolves again');
      assert.equal(target.handshakes.get('127.0.0.1'), 1, 'one TLS handshake for three requests');
      assert.equal(guard.idleConnections, 1);
      // The name now resolves elsewhere: the pooled connection is not used for it.
      assert.equal((await guard.request(url, GET)).address, '127.0.0.2');
      assert.equal(target.handshakes.get('127.0.0.2'), 1);
      assert.equal(target.handshakes.get('127.0.0.1'), 1);
    } finally {
      await guard.close();
    }
  });

  it('concurrent requests to one receiver each keep their connection', async () => {
    const guard = new OutboundGuard({
      allowedCidrs: ['127.0.0.2/32'],
      ca: TEST_CA,
      lookup: async () => [{ address: '127.0.0.2', family: 4 }],
    });
    try {
      const url = `https://localhost:${target.port}/hook`;
      const before = target.handshakes.get('127.0.0.2') ?? 0;
      for (let round = 0; round < 3; round++) {
        const responses = await Promise.all([1, 2, 3, 4].map(() => guard.request(url, GET)));
        assert.deepEqual(
          responses.map((response) => response.status),
          [200, 200, 200, 200],
        );
        assert.equal(guard.idleConnections, 4, `round ${round + 1}: four idle connections kept`);
      }
      assert.equal(
        (target.handshakes.get('127.0.0.2') ?? 0) - before,
        4,
        'four TLS handshakes for twelve requests',
      );
    } finally {
      await guard.close();
      assert.equal(guard.idleConnections, 0);
    }
  });

  it('a refused resolution is refused even with a pooled connection to the host', async () => {
    let lookups = 0;
    const guard = new OutboundGuard({
      allowedCidrs: ['127.0.0.1/32'],
      ca: TEST_CA,
      lookup: async () => {
        lookups += 1;
        return [{ address: lookups === 1 ? '127.0.0.1' : '10.0.0.1', family: 4 }];
      },
    });
    try {
      const url = `https://localhost:${target.port}/hook`;
      await guard.request(url, GET);
      assert.equal(guard.idleConnections, 1);
      await assert.rejects(
        () => guard.request(url, GET),
        (error: Error & { reason?: string }) => error.reason === 'blocked-address',
      );
    } finally {
      await guard.close();
    }
  });

  it('a response cut off at the size cap does not return its connection to the pool', async () => {
    const guard = new OutboundGuard({ allowedCidrs: ['127.0.0.1/32'], ca: TEST_CA });
    try {
      const response = await guard.request(`https://127.0.0.1:${target.port}/big`, GET);
      assert.equal(response.truncated, true);
      assert.equal(guard.idleConnections, 0);
      await guard.request(`https://127.0.0.1:${target.port}/small`, GET);
      assert.equal(guard.idleConnections, 1);
    } finally {
      await guard.close();
      assert.equal(guard.idleConnections, 0);
    }
  });
});
