import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cleanEnv, ROOT } from '../support/parley-process.ts';

describe('DRAIN_GRACE_SECONDS and SHUTDOWN_TIMEOUT_SECONDS (docs/deploy.md, docs/decisions/0023-operations.md)', () => {
  it('a node whose accepted drain grace is longer than the shutdown budget still stops with exit 0', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-grace-'));
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      cwd: ROOT,
      env: {
        ...cleanEnv(),
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'info',
        CLUSTER_SECRET: 'c'.repeat(32),
        DRAIN_GRACE_SECONDS: '3',
        SHUTDOWN_TIMEOUT_SECONDS: '2',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('parley listening')) resolve();
      });
      child.once('exit', () => reject(new Error(`exited early: ${output}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    const code = await exited;
    rmSync(dataDir, { recursive: true, force: true });
    assert.doesNotMatch(output, /shutdown took too long/);
    assert.equal(code, 0, 'a graceful stop exits 0');
  });

  it('a SIGTERM that comes while the server starts stops it gracefully once it is up', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-early-term-'));
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      cwd: ROOT,
      env: { ...cleanEnv(), DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // The listener is up, the first boot's organization and key not yet made (the start is not over).
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Server listening at')) resolve();
      });
    });
    child.kill('SIGTERM');
    const code = await exited;
    rmSync(dataDir, { recursive: true, force: true });
    assert.equal(code, 0, `stopped gracefully, not by the signal: ${output.slice(-400)}`);
    assert.match(output, /"msg":"stopped"/);
  });
});
