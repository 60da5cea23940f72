import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { OutboundGuard } from '../../src/net/outbound-guard.ts';
import { type Receiver, startReceiver, TEST_CA, TEST_CERT, TEST_KEY } from '../support/https-receiver.ts';
import { GET, LOCAL, rejectsWith, scriptedLookup } from './support.ts';

/**
 * Which address `OutboundGuard.request` connects to (docs/decisions/0020-security-promises.md: the resolved address
 * is checked and pinned), and what it reports when the connection fails. The requests themselves are
 * test/net/outbound-guard.test.ts.
 */

describe('DNS rebinding (docs/decisions/0020-security-promises.md: the resolved address is checked and pinned)', () => {
  // "public" stands in as 127.0.0.1 (allowed); "private" is 127.0.0.2 (not allowed) on the same port, with
  // a certificate valid for the name: if the guard ever resolved twice, the request would reach it.
  let publicSide: Receiver;
  let privateSide: Receiver;
  before(async () => {
    publicSide = await startReceiver({ host: '127.0.0.1' });
    privateSide = await startReceiver({ host: '127.0.0.2', port: publicSide.port });
  });
  after(async () => {
    await publicSide.close();
    await privateSide.close();
  });

  it('resolves once per request and connects to exactly the checked address', async () => {
    const { lookup, calls } = scriptedLookup((call) => (call === 0 ? ['127.0.0.1'] : ['127.0.0.2']));
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA, lookup });
    const url = `https://localhost:${publicSide.port}/hook`;
    const first = await guard.request(url, GET);
    assert.equal(first.address, '127.0.0.1');
    assert.equal(calls.length, 1, 'one resolution for the request: nothing re-resolves at connect time');
    assert.equal(publicSide.requests.length, 1);
    assert.equal(publicSide.requests[0]?.localAddress, '127.0.0.1');
    // The next attempt re-resolves, sees the private answer and refuses it.
    await rejectsWith(() => guard.request(url, GET), 'blocked-address', /127\.0\.0\.2.*loopback/);
    assert.equal(calls.length, 2);
    assert.equal(privateSide.requests.length, 0);
  });

  it('a configuration-time check does not carry over: the request re-checks', async () => {
    const { lookup } = scriptedLookup((call) => (call === 0 ? ['127.0.0.1'] : ['127.0.0.2']));
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA, lookup });
    const url = new URL(`https://localhost:${publicSide.port}/hook`);
    assert.equal(await guard.checkHost(url), '127.0.0.1');
    await rejectsWith(() => guard.request(url, GET), 'blocked-address', /127\.0\.0\.2/);
    assert.equal(privateSide.requests.length, 0);
  });

  it('connects to the address the guard checked, not to a fresh resolution of the name', async () => {
    const guard = new OutboundGuard({
      allowedCidrs: ['127.0.0.2/32'],
      ca: TEST_CA,
      lookup: scriptedLookup(() => ['127.0.0.2']).lookup,
    });
    // The system resolver says localhost is 127.0.0.1 (the other side); the checked answer is 127.0.0.2.
    const publicSeen = publicSide.requests.length;
    const response = await guard.request(`https://localhost:${privateSide.port}/hook`, GET);
    assert.equal(response.address, '127.0.0.2');
    assert.equal(privateSide.requests.length, 1);
    assert.equal(privateSide.requests[0]?.localAddress, '127.0.0.2');
    assert.equal(publicSide.requests.length, publicSeen);
    // This is also the control for the tests above: the private side is reachable once allowed.
  });
});

describe('connection failures', () => {
  it('tries the checked addresses in order and reports the one that answered', async () => {
    const receiver = await startReceiver({ host: '127.0.0.3' });
    try {
      const guard = new OutboundGuard({
        allowedCidrs: ['127.0.0.0/8'],
        ca: TEST_CA,
        lookup: scriptedLookup(() => ['127.0.0.4', '127.0.0.3']).lookup,
      });
      const response = await guard.request(`https://localhost:${receiver.port}/`, GET);
      assert.equal(response.address, '127.0.0.3');
    } finally {
      await receiver.close();
    }
  });

  it('gives "connect" when nothing listens', async () => {
    const receiver = await startReceiver();
    const { port } = receiver;
    await receiver.close();
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    await rejectsWith(() => guard.request(`https://127.0.0.1:${port}/`, GET), 'connect', /ECONNREFUSED/);
  });

  it('gives "protocol" when the server does not speak HTTP', async () => {
    const sockets = new Set<TLSSocket>();
    const server = createTlsServer({ cert: TEST_CERT, key: TEST_KEY }, (socket) => {
      sockets.add(socket);
      socket.end('SSH-2.0-OpenSSH_9.6\r\n\r\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
      await rejectsWith(() => guard.request(`https://127.0.0.1:${port}/`, GET), 'protocol');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
