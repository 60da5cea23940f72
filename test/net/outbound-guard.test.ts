import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OutboundGuard, type OutboundRequest } from '../../src/net/outbound-guard.ts';
import {
  mediaBytes,
  type Receiver,
  startMediaServer,
  startReceiver,
  TEST_CA,
} from '../support/https-receiver.ts';
import { GET, LOCAL, rejectsWith, scriptedLookup } from './support.ts';

describe('OutboundGuard.request against a real HTTPS receiver (docs/decisions/0020-security-promises.md)', () => {
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
  });
  after(() => receiver.close());

  it('refuses the receiver at 127.0.0.1 without an allowance, before connecting', async () => {
    const guard = new OutboundGuard({ allowedCidrs: [], ca: TEST_CA });
    const seen = receiver.requests.length;
    await rejectsWith(
      () => guard.request(receiver.url, GET),
      'blocked-address',
      /^address 127\.0\.0\.1 is not allowed \(loopback\)$/,
    );
    assert.equal(receiver.requests.length, seen);
  });

  it('delivers to it with allowedCidrs 127.0.0.1/32: method, headers, exact body bytes', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    receiver.enqueue({ status: 202, headers: { 'x-reply': 'yes' }, body: 'accepted' });
    const body = Buffer.from('{"type":"Message","sequence":1}\n\u00e9');
    const seen = receiver.requests.length;
    const response = await guard.request(`${receiver.url}?a=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': 'evt_1' },
      body,
      timeoutMs: 5_000,
      maxResponseBytes: 2048,
      onTooLarge: 'truncate',
    });
    assert.equal(response.status, 202);
    assert.equal(response.headers['x-reply'], 'yes');
    assert.equal(response.body.toString(), 'accepted');
    assert.equal(response.truncated, false);
    assert.equal(response.address, '127.0.0.1');
    assert.ok(response.durationMs >= 0 && response.durationMs < 5_000);
    assert.equal(receiver.requests.length, seen + 1);
    const got = receiver.requests[seen];
    assert.ok(got);
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/hook?a=1');
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['webhook-id'], 'evt_1');
    assert.deepEqual(got.body, body);
    assert.equal(got.servername, false, 'no SNI for an IP literal');
  });

  it('connects to a name through the pinned address, keeping the hostname for SNI, Host and the certificate', async () => {
    const { lookup, calls } = scriptedLookup(() => ['127.0.0.1']);
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA, lookup });
    const seen = receiver.requests.length;
    const response = await guard.request(`https://localhost:${receiver.port}/named`, GET);
    assert.equal(response.status, 200);
    assert.equal(response.address, '127.0.0.1');
    assert.deepEqual(calls, ['localhost']);
    const got = receiver.requests[seen];
    assert.equal(got?.servername, 'localhost');
    assert.equal(got?.headers.host, `localhost:${receiver.port}`);
  });

  it('refuses at request time a name that resolves to a private address, or to any blocked one', async () => {
    const seen = receiver.requests.length;
    const toPrivate = new OutboundGuard({
      allowedCidrs: [],
      lookup: scriptedLookup(() => ['10.1.2.3']).lookup,
    });
    await rejectsWith(
      () => toPrivate.request(`https://hooks.example:${receiver.port}/`, GET),
      'blocked-address',
      /^host hooks\.example resolves to 10\.1\.2\.3, which is not allowed \(private\)$/,
    );
    const mixed = new OutboundGuard({
      allowedCidrs: LOCAL,
      ca: TEST_CA,
      lookup: scriptedLookup(() => ['127.0.0.1', '192.168.0.10']).lookup,
    });
    await rejectsWith(
      () => mixed.request(`https://localhost:${receiver.port}/`, GET),
      'blocked-address',
      /192\.168\.0\.10/,
    );
    assert.equal(receiver.requests.length, seen);
  });

  it('does not follow a redirect: the 301 comes back and Location is never fetched', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const seen = receiver.requests.length;
    receiver.enqueue({ status: 301, headers: { location: `${receiver.origin}/elsewhere` } });
    const response = await guard.request(receiver.url, GET);
    assert.equal(response.status, 301);
    assert.equal(response.headers.location, `${receiver.origin}/elsewhere`);
    assert.equal(receiver.requests.length, seen + 1);
    assert.equal(receiver.requests[seen]?.url, '/hook');
    assert.ok(!receiver.requests.some((request) => request.url === '/elsewhere'));
  });

  it('returns 410, 500 and Retry-After as they are', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    receiver.enqueue(
      { status: 500, body: 'boom' },
      { status: 410 },
      { status: 429, headers: { 'retry-after': '7' } },
    );
    assert.equal((await guard.request(receiver.url, GET)).status, 500);
    assert.equal((await guard.request(receiver.url, GET)).status, 410);
    const limited = await guard.request(receiver.url, GET);
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '7');
  });

  it('times out with "timeout" against a slow receiver and hangs up', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const seen = receiver.requests.length;
    receiver.enqueue({ delayMs: 30_000 });
    const started = Date.now();
    await rejectsWith(
      () => guard.request(receiver.url, { ...GET, timeoutMs: 300 }),
      'timeout',
      /timed out after 300 ms/,
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 250 && elapsed < 3_000, `took ${elapsed} ms`);
    await receiver.waitFor((requests) => requests[seen]?.reply.state === 'aborted', 5_000);
  });

  it('truncate mode keeps exactly maxResponseBytes and sets truncated', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const truncate: OutboundRequest = { ...GET, maxResponseBytes: 2048, onTooLarge: 'truncate' };
    receiver.enqueue({ bytes: 5000 });
    const cut = await guard.request(receiver.url, truncate);
    assert.equal(cut.truncated, true);
    assert.deepEqual(cut.body, mediaBytes(5000).subarray(0, 2048));

    receiver.enqueue({ bytes: 5000, chunked: true, chunkSize: 700 });
    const cutChunked = await guard.request(receiver.url, truncate);
    assert.equal(cutChunked.truncated, true);
    assert.deepEqual(cutChunked.body, mediaBytes(2048));

    receiver.enqueue({ bytes: 2048, chunked: true, chunkSize: 512 });
    const exact = await guard.request(receiver.url, truncate);
    assert.equal(exact.truncated, false);
    assert.deepEqual(exact.body, mediaBytes(2048));
  });

  it('error mode refuses a declared content-length over the cap without waiting for the body', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const seen = receiver.requests.length;
    // Headers now, body in 30 s: only the announced length can explain a quick "too-large".
    receiver.enqueue({ bytes: 4_000_000, bodyDelayMs: 30_000 });
    const started = Date.now();
    await rejectsWith(
      () => guard.request(receiver.url, { ...GET, timeoutMs: 3_000, maxResponseBytes: 1000 }),
      'too-large',
      /larger than 1000 bytes/,
    );
    assert.ok(Date.now() - started < 2_500);
    await receiver.waitFor((requests) => requests[seen]?.reply.state === 'aborted', 5_000);
    assert.equal(receiver.requests[seen]?.reply.bytesSent, 0);
  });

  it('gives "tls" when the certificate is not trusted or does not name the host', async () => {
    const untrusting = new OutboundGuard({ allowedCidrs: LOCAL });
    await rejectsWith(() => untrusting.request(receiver.url, GET), 'tls', /self-signed|self signed/i);
    const wrongName = new OutboundGuard({
      allowedCidrs: LOCAL,
      ca: TEST_CA,
      lookup: scriptedLookup(() => ['127.0.0.1']).lookup,
    });
    await rejectsWith(
      () => wrongName.request(`https://hooks.example:${receiver.port}/`, GET),
      'tls',
      /ERR_TLS_CERT_ALTNAME_INVALID/,
    );
  });

  it('refuses http:// and userinfo before anything else', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    await rejectsWith(() => guard.request(receiver.url.replace('https:', 'http:'), GET), 'scheme');
    await rejectsWith(
      () => guard.request(receiver.url.replace('https://', 'https://u:p@'), GET),
      'invalid-url',
    );
  });

  it('reports an unresolvable name as "dns"', async () => {
    const guard = new OutboundGuard({
      allowedCidrs: LOCAL,
      lookup: async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
      },
    });
    await rejectsWith(() => guard.request('https://nowhere.example/', GET), 'dns', /nowhere\.example/);
  });

  it('cancels requests in flight on close() and refuses new ones', async () => {
    const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const seen = receiver.requests.length;
    receiver.enqueue({ delayMs: 30_000 });
    const pending = guard.request(receiver.url, { ...GET, timeoutMs: 20_000 });
    await receiver.waitForCount(seen + 1, 5_000);
    await guard.close();
    await rejectsWith(() => pending, 'connect', /closed/);
    await assert.rejects(() => guard.request(receiver.url, GET), /closed/);
  });
});

describe('media fetch: size cap while streaming (docs/decisions/0017-messages-and-media.md)', () => {
  it('error mode cuts an oversize chunked stream off: the server sees the connection closed early', async () => {
    const total = 8 * 1024 * 1024;
    const media = await startMediaServer({
      bytes: total,
      chunkSize: 16_384,
      chunkIntervalMs: 5,
      contentLength: false,
    });
    try {
      const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
      await rejectsWith(
        () => guard.request(media.url, { ...GET, maxResponseBytes: 100_000 }),
        'too-large',
        /larger than 100000 bytes/,
      );
      await media.waitFor((requests) => requests[0]?.reply.state === 'aborted', 5_000);
      const sent = media.requests[0]?.reply.bytesSent ?? total;
      assert.ok(sent < total / 2, `server wrote ${sent} of ${total} bytes`);
    } finally {
      await media.close();
    }
  });

  it('fetches a stream within the cap completely and byte-exact', async () => {
    const media = await startMediaServer({ bytes: 300_000, chunkSize: 10_000, contentType: 'image/png' });
    try {
      const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
      const response = await guard.request(media.url, { ...GET, maxResponseBytes: 300_000 });
      assert.equal(response.headers['content-type'], 'image/png');
      assert.deepEqual(response.body, mediaBytes(300_000));
      await media.waitFor((requests) => requests[0]?.reply.state === 'completed', 5_000);
    } finally {
      await media.close();
    }
  });

  it('the timeout also covers a body that trickles in', async () => {
    const media = await startMediaServer({ bytes: 100_000, chunkSize: 100, chunkIntervalMs: 20 });
    try {
      const guard = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
      await rejectsWith(
        () => guard.request(media.url, { ...GET, timeoutMs: 400, maxResponseBytes: 200_000 }),
        'timeout',
      );
      await media.waitFor((requests) => requests[0]?.reply.state === 'aborted', 5_000);
    } finally {
      await media.close();
    }
  });
});
