import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { adminCreateKey } from '../../src/app/api-keys.ts';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { REDACTED, REDACTING_LOGGER_OPTIONS, redactUrl } from '../../src/http/log-redaction.ts';
import { createServices, type Services } from '../../src/services.ts';
import { until } from '../baileys/support.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { type RawAnswer, rawRequest } from '../support/raw-http.ts';
import { createTestStore, type TestStore } from '../support/store.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The answer's body and headers are parley's envelope with a request id and nosniff. */
function assertEnvelope(answer: RawAnswer, status: number, message: string): void {
  assert.equal(answer.status, status, answer.body);
  assert.deepEqual(JSON.parse(answer.body), { error: { code: status, message } });
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  assert.match(answer.headers['x-request-id'] ?? '', UUID);
  assert.equal(answer.headers['x-content-type-options'], 'nosniff');
}

describe('edge answers over a real socket', () => {
  let t: TestApp;
  let port: number;

  before(async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    assert.ok(address && typeof address === 'object');
    port = address.port;
  });
  after(() => t.close());

  it('an HTTP/1.1 request without Host: 400 in the envelope (it was Node’s bare 400)', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    assertEnvelope(answer, 400, 'Host header is required');
  });

  it('HTTP/1.0 needs no Host', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    assert.equal(answer.status, 200, answer.body);
  });

  it('a 70 KB query string: 414 URI too long (it was 431)', async () => {
    const answer = await rawRequest(
      port,
      `GET /v1/session/status?q=${'a'.repeat(70 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    assertEnvelope(answer, 414, 'URI too long: the URL must be at most 8 KB');
  });

  it('a 9 KB URL within Node’s header limit: 414 with the request id given', async () => {
    const answer = await rawRequest(
      port,
      `GET /healthz?q=${'a'.repeat(9 * 1024)} HTTP/1.1\r\nHost: x\r\nX-Request-Id: probe-url\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(answer.status, 414);
    assert.deepEqual(JSON.parse(answer.body), {
      error: { code: 414, message: 'URI too long: the URL must be at most 8 KB' },
    });
    assert.equal(answer.headers['x-request-id'], 'probe-url');
  });

  it('20 KB of headers with a short URL stays 431', async () => {
    const answer = await rawRequest(
      port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
    );
    assertEnvelope(answer, 431, 'request line and headers must be at most 16 KB');
  });

  it('an upgrade to another protocol than WebSocket (h2c) is served as plain HTTP/1.1, body and next request included', async () => {
    // curl --http2 and Java's HttpClient send `Upgrade: h2c` on http:// URLs; the WebSocket support must not make
    // them fail (src/http/websocket.ts).
    const h2c = 'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n';
    const health = await rawRequest(
      port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings, close\r\n${h2c}\r\n`,
    );
    assert.equal(health.status, 200, health.body);
    assert.equal(JSON.parse(health.body).success, true);
    const body = JSON.stringify({ phone: '+55', body: 'the body was read' });
    const answer = await rawRequest(
      port,
      `POST /v1/messages/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\n` +
        `Connection: Upgrade, HTTP2-Settings\r\n${h2c}` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assert.equal(answer.status, 400);
    const length = Number(answer.headers['content-length']);
    assert.deepEqual(JSON.parse(answer.body.slice(0, length)), {
      error: { code: 400, message: 'phone must be digits only, international format, no leading +' },
    });
    const next = answer.body.slice(length);
    assert.match(next, /^HTTP\/1\.1 200 OK\r\n/, 'the next request on the connection is answered too');
    assert.match(next, /\{"success":true,"code":200,/);
  });
});

describe('edge answers through the app', () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(() => t.close());

  it('GET /dashboard/%2e%2e/%2e%2e/etc/passwd: 404 in the envelope (it was 500)', async () => {
    for (const url of ['/dashboard/%2e%2e/%2e%2e/etc/passwd', '/dashboard/..%2f..%2fetc%2fpasswd']) {
      const res = await t.app.inject({ url });
      assert.equal(res.statusCode, 404, `${url}: ${res.body}`);
      assert.equal(res.json().error.code, 404);
      assert.doesNotMatch(res.body, /root:/);
    }
  });

  it('X-Content-Type-Options: nosniff on JSON answers, successes and errors', async () => {
    for (const url of ['/healthz', '/openapi.json', '/v1/session/status', '/nowhere']) {
      const res = await t.app.inject({ url });
      assert.equal(res.headers['x-content-type-options'], 'nosniff', url);
    }
    const ok = await t.call('GET', `/v1/session/status?from=${t.instance.id}`);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['x-content-type-options'], 'nosniff');
  });

  it('/docs and the dashboard cannot be framed; the dashboard page keeps its own CSP', async () => {
    const docs = await t.app.inject({ url: '/docs/' });
    assert.equal(docs.statusCode, 200);
    assert.equal(docs.headers['x-frame-options'], 'DENY');
    assert.match(String(docs.headers['content-security-policy']), /frame-ancestors 'none'/);
    const api = await t.app.inject({ url: '/dashboard/api/me' });
    assert.equal(api.headers['x-frame-options'], 'DENY');
    const page = await t.app.inject({ url: '/dashboard/' });
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.match(
      String(page.headers['content-security-policy']),
      /^default-src 'self'.*frame-ancestors 'none'/,
    );
    const health = await t.app.inject({ url: '/healthz' });
    assert.equal(health.headers['x-frame-options'], undefined);
  });

  it('no HSTS while PUBLIC_URL is http', async () => {
    const res = await t.app.inject({ url: '/healthz' });
    assert.equal(res.headers['strict-transport-security'], undefined);
  });

  it('HSTS on every answer when PUBLIC_URL is https', async () => {
    const secure = await createTestApp({ env: { PUBLIC_URL: 'https://parley.example.com' } });
    try {
      for (const url of ['/healthz', '/nowhere', '/docs/']) {
        const res = await secure.app.inject({ url });
        assert.equal(res.headers['strict-transport-security'], 'max-age=31536000', url);
      }
    } finally {
      await secure.close();
    }
  });
});

describe('secrets by their shape and one log line per request', () => {
  it('redacts keys, webhook secrets and bearer credentials under any name, and hmac keys', () => {
    assert.equal(
      redactUrl('/v1/session/status?k=svc_test_AbC123_xyz-9&from=5511'),
      `/v1/session/status?k=${REDACTED}&from=5511`,
    );
    assert.equal(redactUrl('/x?q=svc_live_Q1w2e3r4'), `/x?q=${REDACTED}`);
    assert.equal(redactUrl('/x?s=whsec_abc%2Bdef'), `/x?s=${REDACTED}`);
    assert.equal(redactUrl('/x?h=Bearer%20abcdefgh12'), `/x?h=Bearer%20${REDACTED}`);
    assert.equal(redactUrl('/x?hmac_key=deadbeef'), `/x?hmac_key=${REDACTED}`);
  });

  describe('the log of a running app', () => {
    let testStore: TestStore;
    let services: Services;
    let app: FastifyInstance;
    let key: string;
    let instanceId: string;
    const lines: Record<string, unknown>[] = [];

    before(async () => {
      testStore = await createTestStore('sqlite');
      const config = loadConfig({ DATA_DIR: testStore.dataDir, LOG_LEVEL: 'info' });
      const stream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString('utf8').split('\n'))
            if (line !== '') lines.push(JSON.parse(line));
          done();
        },
      });
      services = await createServices(config, {
        logger: pino({ level: 'info', ...REDACTING_LOGGER_OPTIONS }, stream),
        store: testStore.store,
      });
      app = await buildApp(services);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const db = testStore.store.db;
      const org = await adminCreateOrg(db, { name: 'edge-log-org', plan: 'free' });
      instanceId = (await adminCreateInstance(db, { org: org.id, env: 'test', name: 'main' })).id;
      key = (await adminCreateKey(db, { org: org.id, env: 'test' }, Date.now())).key;
    });
    after(async () => {
      await app.close();
      await services.close({ keepStore: true });
      await testStore.cleanup();
    });

    it('one info line per request: method, redacted URL, status, ms, request id; `?k=<key>` never written', async () => {
      const res = await app.inject({
        method: 'GET',
        url: `/v1/session/status?k=${key}&from=${instanceId}`,
        headers: { authorization: `Bearer ${key}`, 'x-request-id': 'edge-one-line' },
      });
      assert.equal(res.statusCode, 200, res.body);
      const mine = lines.filter((line) => line.reqId === 'edge-one-line');
      assert.equal(mine.length, 1, JSON.stringify(mine));
      const [line] = mine;
      assert.equal(line?.level, 30);
      assert.equal(line?.msg, 'request');
      assert.equal(line?.method, 'GET');
      assert.equal(line?.url, `/v1/session/status?k=${REDACTED}&from=${instanceId}`);
      assert.equal(line?.status, 200);
      assert.equal(typeof line?.ms, 'number');
      assert.ok(!JSON.stringify(lines).includes(key), 'no line carries the key');
    });

    it('a secret reaching any log line by another path is redacted when written', () => {
      services.logger.warn({ header: `Bearer ${key}`, body: '{"hmacKey":"hunter2-hmac"}' }, `saw ${key}`);
      const text = JSON.stringify(lines);
      assert.ok(!text.includes(key));
      assert.ok(!text.includes('hunter2-hmac'));
    });

    it('a client aborting mid-body is logged at info, not as an error', async () => {
      const address = app.server.address();
      assert.ok(address && typeof address === 'object');
      const socket = connect({ port: address.port, host: '127.0.0.1' });
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      await new Promise<void>((resolve) =>
        socket.write(
          `POST /v1/messages/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 1000\r\nX-Request-Id: edge-abort\r\n\r\n{"phone":',
          () => resolve(),
        ),
      );
      socket.destroy();
      await until(
        () =>
          lines.some((line) => line.reqId === 'edge-abort' && line.msg === 'client closed the connection'),
        5_000,
        'the line of the aborted request',
      );
      const mine = lines.filter((line) => line.reqId === 'edge-abort');
      assert.deepEqual(
        mine.filter((line) => Number(line.level) >= 50),
        [],
        `no error lines: ${JSON.stringify(mine)}`,
      );
      assert.ok(mine.some((line) => line.msg === 'client closed the connection' && line.level === 30));
    });

    it('a synchronous send whose client leaves mid-wait is logged at info, without a warning or a stack', async () => {
      const address = app.server.address();
      assert.ok(address && typeof address === 'object');
      const base = `http://127.0.0.1:${address.port}`;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      // Each exchange on a connection of its own, so the server holds none but the send's when its client leaves.
      const closing = { ...headers, connection: 'close' };
      const connected = await fetch(`${base}/v1/session/connect?from=${instanceId}`, {
        method: 'POST',
        headers: closing,
        body: '{}',
      });
      assert.equal(connected.status, 200, await connected.text());
      const scan = await fetch(`${base}/v1/sandbox/scan?from=${instanceId}`, {
        method: 'POST',
        headers: closing,
        body: JSON.stringify({ phone: '5511999990401' }),
      });
      assert.equal(scan.status, 200, await scan.text());
      const session = services.sessions.existing(instanceId);
      assert.ok(session, 'the instance has a session');
      // The relay holds the send until the server has seen the client go, so the request's wait is withdrawn.
      // The connections opened from here on (the exchanges above closed theirs).
      const opened: Socket[] = [];
      const watch = (socket: Socket) => void opened.push(socket);
      app.server.on('connection', watch);
      const relay = session.send.bind(session);
      const client = new AbortController();
      session.send = async (message) => {
        client.abort();
        await until(
          () => opened.length > 0 && opened.every((socket) => socket.destroyed),
          5_000,
          'the close',
        );
        return relay(message);
      };
      try {
        await assert.rejects(
          fetch(`${base}/v1/messages/send?from=${instanceId}`, {
            method: 'POST',
            headers: { ...headers, 'x-request-id': 'edge-gone' },
            body: JSON.stringify({ phone: '5511999990402', body: 'left before the answer' }),
            signal: client.signal,
          }),
        );
        await until(
          () =>
            lines.some((line) => line.reqId === 'edge-gone' && line.msg === 'client closed the connection'),
          5_000,
          'the line of the request whose client left',
        );
      } finally {
        session.send = relay;
        app.server.off('connection', watch);
      }
      const mine = lines.filter((line) => line.reqId === 'edge-gone');
      assert.deepEqual(
        mine.filter((line) => Number(line.level) >= 40),
        [],
        `no warning or error lines: ${JSON.stringify(mine)}`,
      );
      const gone = mine.find((line) => line.msg === 'client closed the connection');
      assert.deepEqual(
        { level: gone?.level, code: gone?.code, message: gone?.message, err: gone?.err },
        {
          level: 30,
          code: 'timeout',
          message: 'the client closed its connection before the answer',
          err: undefined,
        },
      );
    });
  });
});
