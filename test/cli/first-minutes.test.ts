import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import { assertOneLineFailure, cleanEnv, Output, ROOT, serveUntilExit } from '../support/parley-process.ts';
import { cli } from './support.ts';

/** What a person sees in the first minutes: `--version`, `--help`, start mistakes and the first boot. */

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('parley --version and --help', () => {
  it('--version prints the version of package.json and exits 0', async () => {
    for (const flag of ['--version', '-V']) {
      const result = await cli({}, flag);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, `${VERSION}\n`);
    }
  });

  it('--help lists every command, sim included', async () => {
    const result = await cli({}, '--help');
    assert.equal(result.code, 0);
    const commands = [...result.stdout.matchAll(/^ {2}([a-z-]+)\b/gm)].map((m) => m[1]);
    for (const name of ['serve', 'listen', 'sim', 'org', 'instance', 'key', 'user', 'help'])
      assert.ok(commands.includes(name), `${name} in --help: ${result.stdout}`);
    const user = await cli({}, 'user', '--help');
    assert.match(user.stdout, /^ {2}reset-password \[options\]/m);
  });
});

describe('a start mistake ends in one line naming the setting, exit 1', () => {
  let busy: Server;
  let busyPort: number;
  before(async () => {
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const address = busy.address();
    assert.ok(address && typeof address === 'object');
    busyPort = address.port;
  });
  after(() => new Promise<void>((resolve) => busy.close(() => resolve())));

  it('PORT that is not a number (the format the others follow)', async () => {
    assertOneLineFailure(
      await serveUntilExit({ PORT: 'notaport' }),
      /^parley: invalid configuration: PORT: Expected integer$/,
    );
  });

  it('OUTBOUND_CA_FILE naming a missing file', async () => {
    const result = await serveUntilExit({ PORT: '0', OUTBOUND_CA_FILE: '/nonexistent/ca.pem' });
    assertOneLineFailure(
      result,
      /^parley: invalid configuration: OUTBOUND_CA_FILE: cannot read "\/nonexistent\/ca\.pem" \(no such file\): set OUTBOUND_CA_FILE to a readable PEM file or unset it$/,
    );
  });

  it('PLATFORM_CA_FILE naming a missing file', async () => {
    const result = await serveUntilExit({
      PORT: '0',
      PLATFORM_URL: 'ws://127.0.0.1:1/ws/chat',
      PLATFORM_CA_FILE: '/nonexistent/media-ca.pem',
    });
    assertOneLineFailure(
      result,
      /^parley: invalid configuration: PLATFORM_CA_FILE: cannot read .*: set PLATFORM_CA_FILE/,
    );
  });

  it('a port in use', async () => {
    const result = await serveUntilExit({ PORT: String(busyPort) });
    assertOneLineFailure(
      result,
      new RegExp(`^parley: port ${busyPort} is in use: set PORT to a free port or stop the other process$`),
    );
  });

  it('an unreachable PostgreSQL server, the password masked', async () => {
    const result = await serveUntilExit({
      PORT: '0',
      DATABASE_URL: 'postgres://parley:s3cretpw@127.0.0.1:1/parley',
    });
    assertOneLineFailure(
      result,
      /^parley: cannot reach PostgreSQL database postgres:\/\/parley:\*\*\*@127\.0\.0\.1:1\/parley \(ECONNREFUSED\): start PostgreSQL or set DATABASE_URL to a reachable server$/,
    );
    assert.ok(!`${result.stdout}${result.stderr}`.includes('s3cretpw'));
  });

  it('a PostgreSQL database that does not exist', { skip: !process.env.TEST_DATABASE_URL }, async () => {
    const url = new URL(process.env.TEST_DATABASE_URL ?? '');
    url.password = 'pw-not-shown';
    url.pathname = `/parley_missing_${randomBytes(4).toString('hex')}`;
    const result = await serveUntilExit({ PORT: '0', DATABASE_URL: url.toString() });
    assertOneLineFailure(
      result,
      /^parley: PostgreSQL database postgres:\/\/.*:\*\*\*@.*\/parley_missing_[0-9a-f]{8} does not exist: create it \(createdb\) or set DATABASE_URL to an existing database$/,
    );
    assert.ok(!`${result.stdout}${result.stderr}`.includes('pw-not-shown'));
  });
  it('a NODE_ID that a live node uses', async () => {
    // A store whose node list has node-a, alive on host-1 (its heartbeat set ahead, so it stays fresh however long
    // this start takes).
    const dir = mkdtempSync(join(tmpdir(), 'parley-node-id-'));
    const path = join(dir, 'parley.db');
    const store = await openStore({ dialect: 'sqlite', path });
    try {
      await migrateToLatest(store);
      await upsertNode(store.db, {
        id: 'node-a',
        host: 'host-1',
        pid: 4321,
        startedAt: new Date().toISOString(),
        heartbeatAt: Date.now() + 60_000,
        processSpace: 'another-machine/pid:[4026531836]',
        incarnation: 'host-1-process',
      });
      const result = await serveUntilExit({
        PORT: '0',
        DATABASE_URL: `sqlite:${path}`,
        CLUSTER_SECRET: 'test-cluster-secret-0123456789abcdef',
        NODE_ID: 'node-a',
      });
      assertOneLineFailure(
        result,
        new RegExp(
          '^parley: NODE_ID node-a is in use by host-1 pid 4321 \\(heartbeat 0 s ago\\): give every node its ' +
            'own NODE_ID; if that process is gone, start again once its heartbeat is older than 8 s$',
        ),
      );
      const row = await store.db.selectFrom('nodes').selectAll().execute();
      assert.deepEqual(
        row.map((node) => [node.id, node.incarnation]),
        [['node-a', 'host-1-process']],
        'the live node keeps its row',
      );
    } finally {
      await store.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the first boot', () => {
  it('prints the framed block after the listening line, each secret exactly once in all output', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-first-'));
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      cwd: ROOT,
      env: { ...cleanEnv(), DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: 'pipe',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const output = new Output(child);
    try {
      const [, password = ''] = await output.waitFor(
        /with the password\n\n {4}(\S+)\n[\s\S]*={78}\n/,
        'the end of the first-boot block',
        exited,
      );
      const text = output.text;
      const [key = ''] = text.match(/svc_test_[0-9A-Za-z]{38}/) ?? [];
      assert.ok(key);
      assert.equal(text.split(key).length, 2, 'the key appears once');
      assert.equal(text.split(password).length, 2, 'the password appears once');
      const listening = text.indexOf('"msg":"parley listening"');
      const block = text.indexOf('parley: first boot');
      assert.ok(listening !== -1 && block > listening, `the block follows the listening line: ${text}`);
      // Framed: a rule right before the header, and the block apart from the JSON lines.
      assert.match(
        text,
        /\n\n={78}\n {2}parley: first boot — shown only this once, store these now\n={78}\n/,
      );
      for (const line of text.split('\n').filter((l) => l.startsWith('{')))
        assert.ok(!line.includes(key) && !line.includes(password), `a log line carries a secret: ${line}`);
    } finally {
      child.kill('SIGTERM');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
