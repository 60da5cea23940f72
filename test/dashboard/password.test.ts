import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cli, storeEnv } from '../cli/support.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { createUser, PASSWORD, signIn } from './support.ts';

const BIN = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs `parley …args` with `input` on its standard input; resolves with the exit code and both streams. */
function cliWithInput(env: Record<string, string>, input: string, ...args: string[]) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
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
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

for (const dialect of testDialects()) {
  describe(`passwords: parley user reset-password and the dashboard's change form [${dialect}]`, () => {
    let t: TestApp;
    let env: Record<string, string>;
    before(async () => {
      t = await createTestApp({ dialect });
      env = storeEnv(t.testStore);
    });
    after(() => t.close());

    const signInStatus = async (email: string, password: string) =>
      (
        await t.app.inject({
          method: 'POST',
          url: '/dashboard/api/sign-in',
          payload: { email, password },
        })
      ).statusCode;

    it('reset-password prints a new password once and signs the user’s browsers out', async () => {
      const email = await createUser(t, 'member');
      const browser = await signIn(t, email);
      assert.equal((await browser.call('GET', '/me')).status, 200);

      const reset = await cli(env, 'user', 'reset-password', '--email', email);
      assert.equal(reset.code, 0, reset.stderr);
      const password = reset.stdout.trim().split('\n').at(-1) ?? '';
      assert.match(password, /^[A-Za-z0-9_-]{20}$/);
      assert.equal(reset.stdout.split(password).length, 2, 'printed once');
      assert.match(reset.stdout, new RegExp(`password of ${email} reset`));

      assert.equal((await browser.call('GET', '/me')).status, 401, 'the old session is gone');
      assert.equal(await signInStatus(email, PASSWORD), 401, 'the old password no longer works');
      assert.equal(await signInStatus(email, password), 200);
    });

    it('reset-password --password-stdin sets the password read from standard input, printing none', async () => {
      const email = await createUser(t, 'viewer');
      const chosen = 'a brand new passphrase';
      const reset = await cliWithInput(
        env,
        `${chosen}\n`,
        'user',
        'reset-password',
        '--email',
        email,
        '--password-stdin',
        '--json',
      );
      assert.equal(reset.code, 0, reset.stderr);
      const json = JSON.parse(reset.stdout);
      assert.equal(json.email, email);
      assert.equal(json.password, undefined);
      assert.equal(json.sessionsEnded, true);
      assert.ok(!reset.stdout.includes(chosen));
      assert.equal(await signInStatus(email, chosen), 200);

      const short = await cliWithInput(
        env,
        'short\n',
        'user',
        'reset-password',
        '--email',
        email,
        '--password-stdin',
      );
      assert.equal(short.code, 1);
      assert.equal(short.stderr, 'parley: password must be at least 12 characters\n');
    });

    it('reset-password for an unknown e-mail: one line, exit 1', async () => {
      const missing = await cli(env, 'user', 'reset-password', '--email', 'nobody@example.com');
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr, 'parley: user nobody@example.com not found\n');
    });

    it('the dashboard changes the signed-in user’s password and signs out its other sessions', async () => {
      const email = await createUser(t, 'owner');
      const here = await signIn(t, email);
      const elsewhere = await signIn(t, email);
      const next = 'another long passphrase';

      const noCsrf = await here.call(
        'POST',
        '/password',
        { currentPassword: PASSWORD, newPassword: next },
        { csrf: false },
      );
      assert.equal(noCsrf.status, 403);

      const wrong = await here.call('POST', '/password', {
        currentPassword: 'not the password',
        newPassword: next,
      });
      assert.equal(wrong.status, 400);
      assert.deepEqual(wrong.body, { error: { code: 400, message: 'current password is wrong' } });

      const short = await here.call('POST', '/password', { currentPassword: PASSWORD, newPassword: 'short' });
      assert.equal(short.status, 400);
      assert.equal(short.body.error.message, 'newPassword must be at least 12 characters');

      assert.equal((await elsewhere.call('GET', '/me')).status, 200, 'nothing changed yet');
      const changed = await here.call('POST', '/password', { currentPassword: PASSWORD, newPassword: next });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));

      assert.equal((await here.call('GET', '/me')).status, 200, 'this session stays');
      assert.equal((await elsewhere.call('GET', '/me')).status, 401, 'the other session is signed out');
      assert.equal(await signInStatus(email, PASSWORD), 401);
      assert.equal(await signInStatus(email, next), 200);
    });
  });
}
