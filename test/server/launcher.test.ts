/**
 * A server started by npm stops once the process that launched it is gone (docs/decisions/0023-operations.md): npm
 * runs a script through a shell, and a shell killed (or one that ends alone on SIGTERM, as Debian's dash does) leaves
 * the server with no parent to stop it. The shell here is killed with SIGKILL, so nothing hands the server a signal.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cleanEnv, Output, ROOT } from '../support/parley-process.ts';

/** Whether `pid` is a running process: not gone and not a zombie nobody reaped yet. */
function running(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

describe('a server started by npm, whose launcher goes', () => {
  it('stops gracefully on its own once the shell that started it is killed', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-launcher-'));
    // `; true` keeps the shell from replacing itself with node: the shell is the launcher, node its child.
    const shell = spawn('/bin/sh', ['-c', `${JSON.stringify(process.execPath)} bin/parley.js serve; true`], {
      cwd: ROOT,
      env: {
        ...cleanEnv(),
        DATA_DIR: dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        npm_lifecycle_event: 'start',
      },
      stdio: 'pipe',
    });
    const shellExited = new Promise((resolve) => shell.once('exit', resolve));
    // The pipes stay open while the server holds them: they close when it exits.
    const closed = new Promise((resolve) => shell.once('close', resolve));
    const output = new Output(shell);
    let pid = 0;
    try {
      const [, serverPid = '0'] = await output.waitFor(
        /"pid":(\d+).*"msg":"parley listening"/,
        'parley listening',
        shellExited,
      );
      pid = Number(serverPid);
      assert.notEqual(pid, shell.pid, 'the server runs as the shell’s child');
      shell.kill('SIGKILL');
      await shellExited;
      await output.waitFor(
        /"launcher":(\d+).*"msg":"the process that started parley is gone; stopping"/,
        'the launcher seen gone',
        new Promise(() => undefined),
      );
      await output.waitFor(/"msg":"stopped"/, 'the graceful stop', new Promise(() => undefined));
      await closed;
      assert.match(output.text, new RegExp(`"launcher":${shell.pid}[,}]`), 'the launcher named is the shell');
      assert.equal(running(pid), false, 'the server process is gone');
    } finally {
      if (pid !== 0 && running(pid)) process.kill(pid, 'SIGKILL');
      if (shell.exitCode === null && shell.signalCode === null) shell.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
