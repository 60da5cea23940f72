import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { startServer } from '../../src/server.ts';

describe('server (DESIGN D3, D14)', () => {
  it('first boot prints a working test key and curl line once; ops endpoints answer', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-server-'));
    const config = loadConfig({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    const printed: string[] = [];
    const logger = pino({ level: 'silent' });
    const server = await startServer(config, { logger, print: (s) => printed.push(s) });
    try {
      assert.equal(printed.length, 1);
      const key = /svc_test_[0-9A-Za-z]{38}/.exec(printed[0] ?? '')?.[0];
      assert.ok(key, 'banner holds the key');
      assert.match(
        printed[0] ?? '',
        new RegExp(`curl -s -X POST http://localhost:0/v1/session/connect -H "Authorization: Bearer ${key}"`),
      );
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
      assert.match(await docs.text(), /swagger/i);
    } finally {
      await server.stop();
    }
    const again = await startServer(config, { logger, print: (s) => printed.push(s) });
    await again.stop();
    assert.equal(printed.length, 1, 'the key is printed on the first boot only');
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
