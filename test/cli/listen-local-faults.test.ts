import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { main } from '../../src/cli/main.ts';

/**
 * `parley listen` faults of this machine end in one line naming the option that fixes them (docs/cli.md), as
 * `serve` names PORT and HOST, never in a stack trace: a --port in use, a --host that is not an address here or
 * does not resolve, a --ca-dir that cannot hold the local CA.
 */
async function cli(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-listen-faults-'));
  const code = await main(['node', 'parley', ...args], {
    out: (text) => out.push(text),
    err: (text) => err.push(text),
    env: { DATA_DIR: dataDir },
  });
  return { code, out, err: err.join('\n') };
}

const webhook = ['listen', '--webhook', '--key', `svc_test_${'x'.repeat(38)}`, '--url', 'http://127.0.0.1:9'];

describe('parley listen: local faults name the option (docs/cli.md)', () => {
  it('a --port in use', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await cli(...webhook, '--port', String(port));
      assert.deepEqual(result, {
        code: 1,
        out: [],
        err: `parley: --port ${port} is in use on 127.0.0.1: choose a free port, or leave --port out for any`,
      });
    } finally {
      blocker.close();
    }
  });

  it('a --host that is not an address of this machine', async () => {
    const result = await cli(...webhook, '--host', '192.0.2.1');
    assert.deepEqual(result, {
      code: 1,
      out: [],
      err: 'parley: --host 192.0.2.1 is not an address of this machine: choose one of its addresses (127.0.0.1)',
    });
  });

  it('a --host that does not resolve', async () => {
    const result = await cli(...webhook, '--host', 'no-such-host.invalid');
    assert.equal(result.code, 1);
    assert.equal(
      result.err,
      'parley: --host no-such-host.invalid does not resolve to an address: choose an address of this machine (127.0.0.1)',
    );
  });

  it('a --ca-dir under a file (--print-ca and --webhook)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'parley-ca-file-')), 'file');
    writeFileSync(file, 'not a directory');
    const expected = `parley: --ca-dir ${file}/ca: cannot keep the local CA there (a part of the path is a file, not a directory); set --ca-dir to a directory this user can write (default: DATA_DIR)`;
    assert.deepEqual(await cli('listen', '--print-ca', '--ca-dir', `${file}/ca`), {
      code: 1,
      out: [],
      err: expected,
    });
    assert.deepEqual(await cli(...webhook, '--ca-dir', `${file}/ca`), { code: 1, out: [], err: expected });
  });

  it('a --ca-dir holding half a CA', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-ca-half-'));
    writeFileSync(join(dir, 'listen-ca.pem'), 'a certificate without its key');
    assert.deepEqual(await cli('listen', '--print-ca', '--ca-dir', dir), {
      code: 1,
      out: [],
      err: `parley: --ca-dir ${dir}: cannot keep the local CA there (it holds one of listen-ca.pem and listen-ca-key.pem without the other: remove it or choose another directory); set --ca-dir to a directory this user can write (default: DATA_DIR)`,
    });
  });
});
