import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { eventually } from '../support/eventually.ts';
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

describe('npm start (docs/decisions/0023-operations.md)', () => {
  it('a SIGTERM to npm stops the server it started, even through a shell that does not hand the signal on', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-npm-term-'));
    // `detached`: npm, its shell and the server get a process group of their own, so the test can end whatever is
    // left of it whichever way the test goes.
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: { ...cleanEnv(), DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    npm.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // The server holds the pipe's write end (inherited through the shell) until it exits.
    let closed = false;
    npm.stdout.once('end', () => {
      closed = true;
    });
    try {
      await eventually('the server listening', () => output.includes('parley listening'));
      const line = output.split('\n').find((l) => l.includes('parley listening')) ?? '';
      const serverPid = (JSON.parse(line) as { pid: number }).pid;
      assert.notEqual(serverPid, npm.pid, 'the server runs in a process of its own under npm');
      npm.kill('SIGTERM');
      await eventually('the server process gone (its output closed)', () => closed, 15_000);
      assert.match(output, /"msg":"stopped"/, `the server stopped gracefully: ${output.slice(-400)}`);
    } finally {
      if (npm.pid !== undefined && alive(-npm.pid)) process.kill(-npm.pid, 'SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

/** Whether process (or, negative, process group) `pid` still exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
