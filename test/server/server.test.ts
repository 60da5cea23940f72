import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { startServer } from '../../src/server.ts';
import { startReceiver, TEST_CA } from '../support/https-receiver.ts';

describe('server (docs/decisions/0003-scopes-and-keys.md, docs/decisions/0023-operations.md)', () => {
  it('first boot prints a working test key once and a curl line; ops endpoints answer', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-server-'));
    const config = loadConfig({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    const printed: string[] = [];
    const logger = pino({ level: 'silent' });
    const server = await startServer(config, { logger, print: (s) => printed.push(s) });
    try {
      assert.equal(printed.length, 1);
      const key = /svc_test_[0-9A-Za-z]{38}/.exec(printed[0] ?? '')?.[0];
      assert.ok(key, 'banner holds the key');
      assert.ok(
        (printed[0] ?? '').includes(
          'curl -s -X POST http://localhost:0/v1/session/connect -H "Authorization: Bearer $PARLEY_KEY"',
        ),
      );
      assert.equal((printed[0] ?? '').split(key).length, 2, 'the key is printed once');
      const connect = await fetch(`${server.url}/v1/session/connect`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(connect.status, 200);
      assert.equal(((await connect.json()) as any).data.details, 'Connected!');
      assert.ok(connect.headers.get('x-request-id'));

      const health = await fetch(`${server.url}/healthz`);
      assert.deepEqual(await health.json(), { success: true, code: 200, data: { status: 'ok' } });
      const ready = await fetch(`${server.url}/readyz`);
      assert.deepEqual(await ready.json(), { success: true, code: 200, data: { status: 'ready' } });
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(
        metrics,
        /parley_http_requests_total\{method="POST",route="\/v1\/session\/connect",status="200"\} 1/,
      );
      const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as any;
      assert.equal(openapi.openapi, '3.1.0');
      assert.ok(openapi.paths['/v1/session/connect'].post, 'routes are described');
      const docs = await fetch(`${server.url}/docs`, { redirect: 'follow' });
      assert.equal(docs.status, 200);
      assert.match(await docs.text(), /<title>parley<\/title>/);
    } finally {
      await server.stop();
    }
    const again = await startServer(config, { logger, print: (s) => printed.push(s) });
    await again.stop();
    assert.equal(printed.length, 1, 'the key is printed on the first boot only');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a request that never completes cannot hold shutdown past its budget', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-stop-'));
    const config = loadConfig({
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'debug',
      SHUTDOWN_TIMEOUT_SECONDS: '1',
    });
    // The server's own log (at debug) says when it has started on the request (a condition, not a sleep).
    let onLog: (line: string) => void = () => undefined;
    const logger = pino({ level: 'debug' }, { write: (line: string) => onLog(line) });
    let banner = '';
    const server = await startServer(config, {
      logger,
      print: (text) => {
        banner = text;
      },
    });
    const key = /svc_test_[0-9A-Za-z]{38}/.exec(banner)?.[0] ?? '';
    const { port } = new URL(server.url);
    const started = new Promise<void>((resolve) => {
      onLog = (line) => {
        if (line.includes('"msg":"incoming request"') && line.includes('/v1/messages/send')) resolve();
      };
    });
    // An authorized client that starts a request body and never finishes it keeps its request in flight.
    const slow = connect(Number(port), '127.0.0.1');
    let answered = '';
    slow.on('data', (chunk: Buffer) => {
      answered += chunk.toString();
    });
    const slowClosed = new Promise<void>((resolve) => slow.once('close', () => resolve()));
    slow.write(
      `POST /v1/messages/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
    );
    await started;
    await server.stop();
    await slowClosed;
    assert.equal(
      answered,
      '',
      'the unfinished request got no answer: its connection was cut at the deadline',
    );
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a request that reaches the app while it closes gets the 503 envelope', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-closing-'));
    const caFile = join(dataDir, 'ca.pem');
    writeFileSync(caFile, TEST_CA);
    const receiver = await startReceiver({
      fallback: { status: 200, body: readFileSync('test/fixtures/media/tiny.png'), delayMs: 300 },
    });
    const config = loadConfig({
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      OUTBOUND_CA_FILE: caFile,
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
    });
    let banner = '';
    const server = await startServer(config, {
      logger: pino({ level: 'silent' }),
      print: (text) => {
        banner = text;
      },
    });
    try {
      const key = /svc_test_[0-9A-Za-z]{38}/.exec(banner)?.[0] ?? '';
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      await fetch(`${server.url}/v1/session/connect`, { method: 'POST', headers, body: '{}' });
      await fetch(`${server.url}/v1/sandbox/scan`, {
        method: 'POST',
        headers,
        body: '{"phone":"5511999990001"}',
      });
      // On one connection: a send whose media answers slowly, then, once the app is closing, a health check.
      const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
      });
      const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      const body = JSON.stringify({ phone: '5511999990002', image: receiver.url });
      socket.write(
        `POST /v1/messages/send/image HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await receiver.waitForCount(1, 5000);
      const stopped = server.stop();
      // Once the listener refuses connections the app is closing; the send is still waiting for its media.
      const port = Number(new URL(server.url).port);
      while (
        await new Promise<boolean>((resolve) => {
          const probe = connect(port, '127.0.0.1');
          probe.once('connect', () => {
            probe.destroy();
            resolve(true);
          });
          probe.once('error', () => resolve(false));
        })
      ) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await stopped;
      await ended;
      const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
      assert.deepEqual(statuses, ['200', '503'], received);
      assert.ok(received.includes('{"error":{"code":503,"message":"server is shutting down"}}'), received);
    } finally {
      await server.stop();
      await receiver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('exits 0 on SIGTERM after finishing in-flight work', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-sigterm-'));
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      env: { ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('parley listening')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`exited early with ${code}: ${output}`)));
    });
    const url = /"url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
    assert.ok(url);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(output, /"msg":"stopped"/);
    rmSync(dataDir, { recursive: true, force: true });
  });
});
