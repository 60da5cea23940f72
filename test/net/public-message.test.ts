import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NOT_PUBLIC_HOST } from '../../src/net/outbound-errors.ts';
import {
  OutboundError,
  type OutboundFailure,
  OutboundGuard,
  type OutboundRequest,
  type ResolvedAddress,
} from '../../src/net/outbound-guard.ts';
import { type Receiver, startReceiver, TEST_CA } from '../support/https-receiver.ts';

const LOCAL = ['127.0.0.1/32'];
const GET: OutboundRequest = {
  method: 'GET',
  timeoutMs: 5_000,
  maxResponseBytes: 65_536,
  onTooLarge: 'error',
};

/** Resolver stand-in: a private answer, a public one, no answer, and NXDOMAIN for anything else. */
async function lookup(hostname: string): Promise<ResolvedAddress[]> {
  if (hostname === 'internal.example') return [{ address: '10.1.2.3', family: 4 }];
  if (hostname === 'metadata.example') return [{ address: '169.254.169.254', family: 4 }];
  if (hostname === 'v6-loopback.example') return [{ address: '::1', family: 6 }];
  if (hostname === 'empty.example') return [];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
}

/** The OutboundError `run` rejects with, checked for its reason. */
async function failure(run: () => Promise<unknown>, reason: OutboundFailure): Promise<OutboundError> {
  try {
    await run();
  } catch (error) {
    assert.ok(error instanceof OutboundError, `expected OutboundError, got ${String(error)}`);
    assert.equal(error.reason, reason, error.message);
    return error;
  }
  assert.fail('expected a rejection');
}

/**
 * Nothing a caller must not learn (docs/decisions/0020-security-promises.md): no address, address class or resolver
 * code.
 */
function assertNoInternals(text: string): void {
  assert.doesNotMatch(text, /\d+\.\d+\.\d+\.\d+|::|localhost|\.example/, text);
  assert.doesNotMatch(text, /loopback|private|metadata|link-local|reserved|ENOTFOUND|EAI_|ECONN/i, text);
}

describe('OutboundError.publicMessage: caller-safe text (docs/decisions/0020-security-promises.md)', () => {
  const guard = new OutboundGuard({ allowedCidrs: [], lookup });

  it('a host resolving to a private address and one that does not resolve read the same', async () => {
    const cases: [string, OutboundFailure, RegExp][] = [
      [
        'https://internal.example/hook',
        'blocked-address',
        /internal\.example resolves to 10\.1\.2\.3.*private/,
      ],
      ['https://metadata.example/hook', 'blocked-address', /169\.254\.169\.254.*metadata/],
      ['https://v6-loopback.example/hook', 'blocked-address', /::1.*loopback/],
      ['https://10.1.2.3/hook', 'blocked-address', /10\.1\.2\.3.*private/],
      ['https://nowhere.example/hook', 'dns', /nowhere\.example could not be resolved \(ENOTFOUND\)/],
      ['https://empty.example/hook', 'dns', /empty\.example has no address/],
    ];
    for (const [url, reason, detail] of cases) {
      for (const run of [() => guard.checkHost(new URL(url)), () => guard.request(url, GET)]) {
        const error = await failure(run, reason);
        // The detail stays in `message`, for the server log.
        assert.match(error.message, detail);
        assert.equal(error.publicMessage, 'the host does not resolve to an allowed public address', url);
      }
    }
    assert.equal(NOT_PUBLIC_HOST, 'the host does not resolve to an allowed public address');
  });

  it('URL shape errors name the rule, from the caller’s own input only', async () => {
    const scheme = await failure(async () => guard.parseUrl('http://internal.example/'), 'scheme');
    assert.equal(scheme.publicMessage, 'the URL must use https');
    const userinfo = await failure(
      async () => guard.parseUrl('https://u:p@internal.example/'),
      'invalid-url',
    );
    assert.equal(userinfo.publicMessage, 'URL must not contain a username or password');
    const invalid = await failure(async () => guard.parseUrl('https://'), 'invalid-url');
    assert.equal(invalid.publicMessage, 'URL is not valid');
    const long = await failure(
      async () => guard.parseUrl(`https://a.example/${'x'.repeat(4100)}`),
      'invalid-url',
    );
    assert.equal(long.publicMessage, 'URL is longer than 4096 characters');
  });

  it('a lookup that never answers is "the request timed out"', async () => {
    const stuck = new OutboundGuard({ allowedCidrs: [], lookup: () => new Promise(() => undefined) });
    const error = await failure(
      () => stuck.request('https://slow.example/', { ...GET, timeoutMs: 50 }),
      'timeout',
    );
    assert.match(error.message, /slow\.example/);
    assert.equal(error.publicMessage, 'the request timed out');
  });

  it('the generic reasons carry no internals even when one is constructed with a detailed message', () => {
    const detailed = new OutboundError('dns', 'host db.internal could not be resolved (EAI_AGAIN)', {
      publicMessage: 'host db.internal could not be resolved (EAI_AGAIN)',
    });
    assert.equal(detailed.publicMessage, NOT_PUBLIC_HOST, 'no override for dns or blocked-address');
    const texts: [OutboundFailure, string][] = [
      ['connect', 'the connection failed'],
      ['tls', 'the TLS handshake failed'],
      ['protocol', 'the server sent an invalid HTTP response'],
      ['timeout', 'the request timed out'],
      ['too-large', 'the response was too large'],
      ['blocked-address', NOT_PUBLIC_HOST],
    ];
    for (const [reason, text] of texts) {
      const error = new OutboundError(reason, `host db.internal (10.9.8.7) failed: ${reason}`);
      assert.equal(error.publicMessage, text);
      assertNoInternals(error.publicMessage);
    }
  });
});

describe('OutboundError.publicMessage of connection-level failures', () => {
  let receiver: Receiver;
  let closedPort: number;
  before(async () => {
    receiver = await startReceiver();
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === 'object');
    closedPort = address.port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  after(() => receiver.close());

  it('connect, TLS and too-large failures: generic phrase for the caller, details in message', async () => {
    const trusting = new OutboundGuard({ allowedCidrs: LOCAL, ca: TEST_CA });
    const refused = await failure(() => trusting.request(`https://127.0.0.1:${closedPort}/`, GET), 'connect');
    assert.match(refused.message, /ECONNREFUSED/);
    assert.equal(refused.publicMessage, 'the connection failed');

    const untrusting = new OutboundGuard({ allowedCidrs: LOCAL });
    const tls = await failure(() => untrusting.request(receiver.url, GET), 'tls');
    assert.match(tls.message, /self-signed|self signed/i);
    assert.equal(tls.publicMessage, 'the TLS handshake failed');

    const seen = receiver.requests.length;
    receiver.enqueue({ bytes: 5000 });
    const large = await failure(
      () => trusting.request(receiver.url, { ...GET, maxResponseBytes: 1000 }),
      'too-large',
    );
    assert.match(large.message, /127\.0\.0\.1:\d+ is larger than 1000 bytes/);
    assert.equal(large.publicMessage, 'the response exceeded 1000 bytes');
    await receiver.waitFor((requests) => requests[seen]?.reply.state !== 'pending', 5_000);
    for (const error of [refused, tls, large]) assertNoInternals(error.publicMessage);
  });
});
