/**
 * The simulator's state directory: a simulator restarted on the same port with the same directory keeps its root
 * key, accounts, linked devices and Signal state, so a real Baileys client logs in again without a QR and
 * messages still decrypt both ways; a missing file is a fresh start, a corrupt one a clear error; the
 * `parley sim --state-dir` command keeps accounts across runs.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { WA_CERT_DETAILS } from 'baileys';
import { decodeState, encodeState, StateError } from '../../sim/model/state.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  control,
  endClient,
  pairClient,
  WAIT_MS,
  waitForEvent,
  waitForUpdate,
} from './support.ts';

const dirs: string[] = [];
function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'parley-sim-state-'));
  dirs.push(dir);
  return dir;
}

async function startTrusted(options: { stateDir: string; port?: number }): Promise<Simulator> {
  const sim = await startSimulator(options);
  WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(sim.rootKey);
  return sim;
}

/** Waits until `phone`'s inbox on `sim` holds a text entry `text`. */
async function inboxText(sim: Simulator, phone: string, text: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!sim.context.accounts.get(phone)?.inbox.some((e) => e.text === text)) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for "${text}" in ${phone}'s inbox`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('simulator state directory', () => {
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('restarted on the same port with its state: the device logs in without a scan, messages flow both ways', async () => {
    const dir = stateDir();
    const first = await startTrusted({ stateDir: dir });
    const account = '5511930000001';
    const friend = '5511930000002';
    await control(first, 'POST', '/users', { phone: account, pushName: 'Shop' });
    await control(first, 'POST', '/users', { phone: friend, pushName: 'Ana' });
    const client = await pairClient(first, account);
    // Sessions exist on both sides before the restart: a message each way.
    const before = waitForEvent(
      client,
      'messages.upsert',
      (u) => u.messages.some((m) => m.message?.conversation === 'before'),
      'the text sent before the restart',
    );
    assert.equal(
      (await control(first, 'POST', '/messages', { from: friend, to: account, text: 'before' })).status,
      201,
    );
    await before;
    await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'reply before' });
    await inboxText(first, friend, 'reply before');
    const rootKey = Buffer.from(first.rootKey);
    const port = first.port;
    const closed = waitForUpdate(client, (u) => u.connection === 'close', 'the close at shutdown');
    await first.close();
    await closed;
    assert.ok(existsSync(join(dir, 'state.json')));

    const second = await startTrusted({ stateDir: dir, port });
    try {
      assert.ok(second.rootKey.equals(rootKey), 'the root key is kept');
      assert.equal(second.url, first.url);
      const again = connectClient(second, client.auth);
      const opened = await waitForUpdate(
        again,
        (u) => u.connection === 'open' || typeof u.qr === 'string' || u.connection === 'close',
        'open, a QR or a close',
      );
      assert.equal(opened.connection, 'open', `logged in without a scan (got ${JSON.stringify(opened)})`);
      const account2 = await control(second, 'GET', `/accounts/${account}`);
      assert.deepEqual((account2.body as { devices: unknown[] }).devices, [
        { id: 0, linked: true, sockets: 0 },
        { id: 1, linked: true, sockets: 1 },
      ]);
      // The friend's phone kept its session with the device, and the device's with the phone.
      const after = waitForEvent(
        again,
        'messages.upsert',
        (u) => u.messages.some((m) => m.message?.conversation === 'after'),
        'the text sent after the restart',
      );
      assert.equal(
        (await control(second, 'POST', '/messages', { from: friend, to: account, text: 'after' })).status,
        201,
      );
      await after;
      await again.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'reply after' });
      await inboxText(second, friend, 'reply after');
      await endClient(again);
    } finally {
      await second.close();
    }
  });

  it('a message queued for an offline device survives the restart and arrives at its next login', async () => {
    const dir = stateDir();
    const first = await startTrusted({ stateDir: dir });
    const account = '5511930000004';
    const friend = '5511930000005';
    await control(first, 'POST', '/users', { phone: account });
    await control(first, 'POST', '/users', { phone: friend });
    const client = await pairClient(first, account);
    await endClient(client);
    const queued = await control(first, 'POST', '/messages', {
      from: friend,
      to: account,
      text: 'while away',
    });
    assert.deepEqual(
      [(queued.body as { devices: number }).devices, (queued.body as { online: number }).online],
      [1, 0],
    );
    await first.close();
    const second = await startTrusted({ stateDir: dir, port: first.port });
    try {
      const again = connectClient(second, client.auth);
      await waitForEvent(
        again,
        'messages.upsert',
        (u) => u.messages.some((m) => m.message?.conversation === 'while away'),
        'the queued text after the restart',
      );
      await endClient(again);
    } finally {
      await second.close();
    }
  });

  it('an unlinked device stays unlinked after a restart (401)', async () => {
    const dir = stateDir();
    const first = await startTrusted({ stateDir: dir });
    const account = '5511930000003';
    await control(first, 'POST', '/users', { phone: account });
    const client = await pairClient(first, account);
    const closed = waitForUpdate(client, (u) => u.connection === 'close', 'the 401');
    await control(first, 'POST', '/faults', { phone: account, kind: 'stream-error', code: 401 });
    await closed;
    await first.close();
    const second = await startTrusted({ stateDir: dir, port: first.port });
    try {
      const refused = connectClient(second, client.auth);
      const update = await waitForUpdate(refused, (u) => u.connection === 'close', 'the refusal');
      assert.equal(closeCode(update), 401);
    } finally {
      await second.close();
    }
  });

  it('a missing state file is a fresh start; the file is written at once', async () => {
    const dir = join(stateDir(), 'nested', 'new');
    const sim = await startSimulator({ stateDir: dir });
    try {
      assert.deepEqual((await control(sim, 'GET', '/accounts/5511930000009')).status, 404);
    } finally {
      await sim.close();
    }
    const saved = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as { version: number };
    assert.equal(saved.version, 1);
  });

  it('a corrupt state file: the simulator refuses to start and says which file and what to do', async () => {
    const dir = stateDir();
    writeFileSync(join(dir, 'state.json'), '{"version":1,"root":');
    await assert.rejects(startSimulator({ stateDir: dir }), (error: unknown) => {
      assert.ok(error instanceof StateError);
      assert.match(
        error.message,
        new RegExp(
          `^simulator state file ${join(dir, 'state.json').replaceAll('/', '\\/')} is not valid JSON .*; move it away \\(or start without --state-dir\\) to start fresh$`,
        ),
      );
      return true;
    });
    writeFileSync(join(dir, 'state.json'), '{"version":99}');
    await assert.rejects(startSimulator({ stateDir: dir }), /has layout version 99, this simulator reads 1/);
    writeFileSync(join(dir, 'state.json'), '{"version":1,"root":{"public":{"$bytes":"AA=="}},"users":[]}');
    await assert.rejects(startSimulator({ stateDir: dir }), /has no valid root key/);
  });

  describe('parley sim --state-dir', () => {
    let child: ChildProcess | undefined;
    after(async () => {
      if (child && child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    });

    async function run(dir: string): Promise<{ rootKey: string; control: string }> {
      child = spawn(
        process.execPath,
        ['bin/parley.js', 'sim', '--json', '--log-level', 'silent', '--state-dir', dir],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const stdout = child.stdout;
      assert.ok(stdout);
      const [line] = (await once(createInterface({ input: stdout }), 'line')) as [string];
      return JSON.parse(line) as { rootKey: string; control: string };
    }

    async function stop(): Promise<void> {
      child?.kill('SIGTERM');
      if (child) assert.equal(((await once(child, 'exit')) as [number | null])[0], 0);
    }

    it('keeps the root key and the users across runs', async () => {
      const dir = stateDir();
      const first = await run(dir);
      const created = await fetch(`${first.control}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ phone: '5511930000010' }),
      });
      assert.equal(created.status, 201);
      await stop();
      const second = await run(dir);
      assert.equal(second.rootKey, first.rootKey);
      const again = await fetch(`${second.control}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ phone: '5511930000010' }),
      });
      assert.equal(again.status, 409);
      await stop();
    });
  });
});

describe('state file codec', () => {
  it('bytes, Maps and Sets come back as they were, nested', () => {
    const root = { public: Buffer.alloc(32, 1), private: Buffer.alloc(32, 2) };
    const text = encodeState({ root, users: [] });
    const extra = JSON.parse(
      JSON.stringify({ m: { $map: [[1, { $bytes: 'AQI=' }]] }, s: { $set: ['a', 'b'] } }),
    );
    const back = decodeState(text, 'state.json');
    assert.ok(back.root.public.equals(root.public));
    assert.ok(back.root.private.equals(root.private));
    const nested = decodeState(
      JSON.stringify({ version: 1, root: JSON.parse(text).root, users: [], extra }),
      'state.json',
    ) as unknown as { extra: { m: Map<number, Buffer>; s: Set<string> } };
    assert.deepEqual(nested.extra.m.get(1), Buffer.from([1, 2]));
    assert.deepEqual([...nested.extra.s], ['a', 'b']);
  });
});
