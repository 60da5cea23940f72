import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cleanEnv, ROOT } from '../support/parley-process.ts';

/** `parley serve` with `env` (DATA_DIR a fresh folder unless given); resolves when it exits. */
function serve(env: Record<string, string>, prepare?: (dataDir: string) => void) {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-start-'));
  prepare?.(dataDir);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      cwd: ROOT,
      env: { ...cleanEnv(), DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => {
      rmSync(dataDir, { recursive: true, force: true });
      resolve({ code, stdout, stderr });
    });
  });
}

function assertOneLine(result: { code: number | null; stdout: string; stderr: string }, line: RegExp): void {
  assert.equal(result.code, 1, `${result.stdout}\n${result.stderr}`);
  const lines = result.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `one line on stderr: ${result.stderr}`);
  assert.match(lines[0] ?? '', line);
  assert.doesNotMatch(`${result.stdout}${result.stderr}`, /\n\s+at /, 'no stack frames');
}

describe('start-up errors print one line naming the setting (docs/deploy.md "Start-up errors")', () => {
  it('a HOST that does not resolve', async () => {
    const result = await serve({ HOST: 'parley-host.invalid' });
    assertOneLine(result, /^parley: .*HOST/);
  });

  it('a key file in DATA_DIR that does not hold a key', async () => {
    const result = await serve({}, (dataDir) => writeFileSync(join(dataDir, 'secret.key'), 'garbage\n'));
    assertOneLine(result, /^parley: .*secret\.key.*(DATA_DIR|SECRET_KEY)/);
  });
});

describe('a REDIS_URL that is not a URL (README "Configuration")', () => {
  it('stops the start with one line naming REDIS_URL', async () => {
    const result = await serve({ REDIS_URL: 'redis://127.0.0.1:99999/9' });
    assertOneLine(result, /^parley: .*REDIS_URL/);
  });
});
