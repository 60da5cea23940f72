import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { type RawAnswer, rawRequest } from '../support/raw-http.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("HTTP-level errors answer parley's envelope with x-request-id", () => {
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

  function assertEnvelope(answer: RawAnswer, status: number, message: string): void {
    assert.equal(answer.status, status, answer.body);
    assert.deepEqual(JSON.parse(answer.body), { error: { code: status, message } });
    assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
    assert.match(answer.headers['x-request-id'] ?? '', UUID);
  }

  it('400 for a header value with a control byte (Node parser)', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n');
    assertEnvelope(answer, 400, 'a request header has an invalid character in its name or value');
    assert.equal(answer.headers.connection, 'close');
  });

  it('400 for a header name with a space (Node parser)', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: a\r\n\r\n');
    assertEnvelope(answer, 400, 'a request header has an invalid character in its name or value');
  });

  it('400 for a request line that is not HTTP', async () => {
    const answer = await rawRequest(port, 'GARBAGE\r\n\r\n');
    assertEnvelope(answer, 400, 'request line has an invalid method');
  });

  it('400 for a Content-Length that is not a number', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
    assertEnvelope(answer, 400, 'Content-Length header is invalid');
  });

  it('400 for an unknown HTTP version in the request line', async () => {
    const answer = await rawRequest(port, 'GET /healthz HTTP/7.3\r\nHost: x\r\n\r\n');
    assertEnvelope(answer, 400, 'request line has an invalid HTTP version');
  });

  it('431 for 20 KB of headers', async () => {
    const answer = await rawRequest(
      port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
    );
    assertEnvelope(answer, 431, 'request line and headers must be at most 16 KB');
  });

  it('414 for a 101-character delivery id, the path not echoed, the given request id kept', async () => {
    const id = 'd'.repeat(101);
    const answer = await rawRequest(
      port,
      `POST /v1/webhook/deliveries/${id}/redeliver HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\n` +
        'X-Request-Id: probe-414\r\nConnection: close\r\n\r\n',
    );
    assert.equal(answer.status, 414);
    assert.deepEqual(JSON.parse(answer.body), {
      error: { code: 414, message: 'a path parameter is longer than 100 characters' },
    });
    assert.equal(answer.headers['x-request-id'], 'probe-414');
    assert.ok(!answer.body.includes(id));
  });

  it('400 for broken percent-encoding in a path parameter (router)', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/webhook/deliveries/%E0%A4%A/redeliver',
      headers: { authorization: `Bearer ${t.key}` },
    });
    assert.equal(response.statusCode, 400);
    assert.deepEqual(response.json(), {
      error: { code: 400, message: 'request path has invalid percent-encoding' },
    });
    assert.match(String(response.headers['x-request-id']), UUID);
  });

  it('413 for a body over the route limit, over a real socket', async () => {
    const body = JSON.stringify({ phone: '5511999990002', body: 'x'.repeat(1024 * 1024) });
    const answer = await rawRequest(
      port,
      `POST /v1/messages/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    assertEnvelope(answer, 413, 'request body must be at most 1 MB');
  });

  it('415 for text/plain on a JSON route (it was parsed as text and answered 400)', async () => {
    for (const url of ['/v1/messages/send', '/v1/session/connect', '/chat/send/text']) {
      const response = await t.call('POST', url, '{"phone":"5511999990002","body":"hi"}', {
        'content-type': 'text/plain',
        'x-instance-id': t.instance.id,
      });
      assert.equal(response.status, 415, url);
      assert.deepEqual(response.body, {
        error: { code: 415, message: 'Content-Type must be application/json' },
      });
      assert.match(String(response.headers['x-request-id']), UUID);
    }
  });

  it('415 for other non-JSON types too', async () => {
    const response = await t.call('POST', '/v1/messages/send', 'phone=5511999990002', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    assert.equal(response.status, 415);
    assert.deepEqual(response.body, {
      error: { code: 415, message: 'Content-Type must be application/json' },
    });
  });

  it('400 naming the key for __proto__ anywhere in a body (valid JSON, refused on purpose)', async () => {
    const cases: [string, string][] = [
      ['{"phone":"5511999990002","body":"hi","__proto__":{"admin":true}}', '__proto__'],
      ['{"phone":"5511999990002","body":"hi","x":{"y":[{"__proto__":{}}]}}', 'x.y[0].__proto__'],
    ];
    for (const [payload, at] of cases) {
      const response = await t.call('POST', '/v1/messages/send', payload, {
        'content-type': 'application/json',
      });
      assert.equal(response.status, 400, payload);
      assert.deepEqual(response.body, {
        error: { code: 400, message: `request body must not contain the key __proto__ (found at ${at})` },
      });
      assert.match(String(response.headers['x-request-id']), UUID);
    }
  });

  it('400 naming the key for constructor.prototype', async () => {
    const response = await t.call(
      'POST',
      '/v1/session/connect',
      '{"subscribe":["Message"],"constructor":{"prototype":{"polluted":true}}}',
      { 'content-type': 'application/json' },
    );
    assert.equal(response.status, 400);
    assert.deepEqual(response.body, {
      error: {
        code: 400,
        message:
          'request body must not contain the key constructor.prototype (found at constructor.prototype)',
      },
    });
  });

  it('a plain "constructor" field and text mentioning __proto__ are fine', async () => {
    const response = await t.call(
      'POST',
      '/v1/session/connect',
      '{"subscribe":["Message"],"constructor":"x","note":"__proto__"}',
      { 'content-type': 'application/json' },
    );
    assert.equal(response.status, 200, JSON.stringify(response.body));
  });

  it('still 400 "not valid JSON" for broken JSON, and the depth limit is kept', async () => {
    const broken = await t.call('POST', '/v1/session/connect', '{"subscribe":', {
      'content-type': 'application/json',
    });
    assert.deepEqual(broken.body, { error: { code: 400, message: 'request body is not valid JSON' } });
    const deep = await t.call('POST', '/v1/session/connect', `${'['.repeat(40)}${']'.repeat(40)}`, {
      'content-type': 'application/json',
    });
    assert.deepEqual(deep.body, {
      error: { code: 400, message: 'request body is nested deeper than 32 levels' },
    });
  });

  it('404 for an unknown route carries the envelope and x-request-id', async () => {
    const response = await t.call('GET', '/v1/nowhere?api_key=x');
    assert.deepEqual(response.body, { error: { code: 404, message: 'route GET /v1/nowhere not found' } });
    assert.match(String(response.headers['x-request-id']), UUID);
  });
});
