import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { WA_CERT_DETAILS } from 'baileys';
import { connectClient, endClient, memoryAuth, waitForUpdate } from './support.ts';

describe('parley sim (the command)', () => {
  let child: ChildProcess | undefined;
  after(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  it('--json prints the facts first; the control API and the WebSocket answer there; SIGTERM stops it', async () => {
    child = spawn(
      process.execPath,
      ['bin/parley.js', 'sim', '--json', '--port', '0', '--log-level', 'silent'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const stdout = child.stdout;
    assert.ok(stdout);
    const lines = createInterface({ input: stdout });
    const [first] = (await once(lines, 'line')) as [string];
    const facts = JSON.parse(first) as { url: string; rootKey: string; control: string; caFile: string };
    assert.deepEqual(Object.keys(facts), ['url', 'rootKey', 'control', 'caFile']);
    assert.match(readFileSync(facts.caFile, 'utf8'), /^-----BEGIN CERTIFICATE-----/);
    assert.match(facts.url, /^ws:\/\/127\.0\.0\.1:[0-9]+\/ws\/chat$/);
    assert.match(facts.rootKey, /^[0-9a-f]{64}$/);
    assert.equal(facts.control, facts.url.replace('ws://', 'http://').replace('/ws/chat', '/control'));

    const created = await fetch(`${facts.control}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ phone: '15550001111' }),
    });
    assert.equal(created.status, 201);

    WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(facts.rootKey, 'hex');
    const client = connectClient({ url: facts.url }, memoryAuth());
    await waitForUpdate(client, (u) => typeof u.qr === 'string', 'a QR from the spawned simulator');
    await endClient(client);

    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
    assert.equal(existsSync(facts.caFile), false, 'the CA file is removed at exit');
  });
});
