import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { startServer } from '../../src/server.ts';

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
          `curl -s -X POST http://localhost:${new URL(server.url).port}/v1/session/connect -H "Authorization: Bearer $PARLEY_KEY"`,
        ),
        'with PORT=0 the banner names the port the server got',
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
