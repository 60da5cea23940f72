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
});
