/**
 * The package `npm pack` makes, installed alone: the tarball is installed into an empty folder with production
 * dependencies only (`npm install <tarball> --omit=dev`, the registry reached for the dependencies, the npm cache
 * preferred), then `npx parley serve` must answer /healthz and `npx parley sim --json` must print its facts line,
 * with no TypeScript tooling installed (docs/decisions/0014-compiled-build-and-licences.md, docs/deploy.md).
 *
 * The install takes better-sqlite3's native addon as a prebuilt binary served by the test (see servePrebuiltSqlite).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cleanEnv, Output, ROOT } from '../support/parley-process.ts';

/** The environment without npm's own variables (set when the suite runs under `npm test`), which would point the
 * child npm at this checkout's configuration and folder. */
function npmFreeEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(cleanEnv()).filter(([name]) => !/^npm_/i.test(name) && name !== 'INIT_CWD'),
  );
}

/** Runs npm synchronously in `cwd`; fails the test with npm's output when it exits non-zero. */
function npm(args: string[], cwd: string): string {
  const result = spawnSync('npm', args, { cwd, env: npmFreeEnv(), encoding: 'utf8' });
  assert.equal(result.status, 0, `npm ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** Runs npm in `cwd` without blocking this process (a server of this process may be answering it). */
async function npmAsync(args: string[], cwd: string, extraEnv: Record<string, string>): Promise<void> {
  const child = spawn('npm', args, { cwd, env: { ...npmFreeEnv(), ...extraEnv }, stdio: 'pipe' });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  assert.equal(code, 0, `npm ${args.join(' ')} failed:\n${output}`);
}

/**
 * Serves better-sqlite3's native addon as built in this checkout, packed the way its prebuilt binaries are
 * published (prebuild-install fetches `<host>/v<version>/better-sqlite3-v<version>-node-v<abi>-<platform>-<arch>.tar.gz`,
 * a tarball of `build/Release/better_sqlite3.node`; its host is set by `npm_config_better_sqlite3_binary_host`).
 * The install then takes a prebuilt binary, as it does from the package's release page on a machine with the
 * internet, instead of compiling SQLite: this machine's network reaches only the registries, and the compile costs
 * a minute of a core. → the URL to set as the host, how many downloads were served, and `close`.
 */
async function servePrebuiltSqlite(
  dir: string,
): Promise<{ url: string; served: () => number; close: () => Promise<void> }> {
  const tarball = join(dir, 'better-sqlite3-prebuilt.tar.gz');
  const packed = spawnSync(
    'tar',
    [
      '-czf',
      tarball,
      '-C',
      join(ROOT, 'node_modules', 'better-sqlite3'),
      'build/Release/better_sqlite3.node',
    ],
    { encoding: 'utf8' },
  );
  assert.equal(packed.status, 0, `tar failed: ${packed.stderr}`);
  const body = readFileSync(tarball);
  let served = 0;
  const server = createServer((request, response) => {
    if (!request.url?.endsWith('.tar.gz')) {
      response.writeHead(404).end();
      return;
    }
    served += 1;
    response.writeHead(200, { 'content-type': 'application/gzip', 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    served: () => served,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A command started with `npx` in its own process group, so SIGTERM reaches the node process behind npx. */
function npx(args: string[], cwd: string, env: Record<string, string>) {
  const child = spawn('npx', ['--no', ...args], { cwd, env, detached: true, stdio: 'pipe' });
  // 'close', not 'exit': npx may exit on the group's SIGTERM before the node process behind it has written its last
  // line; the pipes close only when every process holding them (npx and parley) is gone.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, output: new Output(child) };
}

/** SIGTERM to the process group of `child`, then waits for it (SIGKILL to the group after 20 s). */
async function stopGroup(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  process.kill(-pid, 'SIGTERM');
  const stuck = setTimeout(() => process.kill(-pid, 'SIGKILL'), 20_000);
  await exited;
  clearTimeout(stuck);
}

describe('npm pack: the package serves and simulates with nothing else installed', {
  timeout: 20 * 60_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-pack-'));
  const stops: (() => Promise<void>)[] = [];
  let tarball = '';
  let files: string[] = [];

  before(async () => {
    // prepack builds what is stale in dist/ and ships package-lock.json as npm-shrinkwrap.json
    const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], ROOT)) as {
      filename: string;
      files: { path: string }[];
    }[];
    assert.ok(packed, 'npm pack reported no package');
    tarball = join(dir, packed.filename);
    files = packed.files.map((f) => f.path);
    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), '{ "private": true }\n');
    const prebuilt = await servePrebuiltSqlite(dir);
    stops.push(prebuilt.close);
    await npmAsync(['install', tarball, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], app, {
      npm_config_better_sqlite3_binary_host: prebuilt.url,
    });
    assert.ok(prebuilt.served() > 0, 'the install took the prebuilt better-sqlite3 binary');
  });

  after(async () => {
    for (const stop of stops) await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the compiled server, simulator and dashboard, the licences, and no TypeScript sources', () => {
    for (const path of [
      'bin/parley.js',
      'dist/src/cli/main.js',
      'dist/src/server.js',
      'dist/sim/cli.js',
      // the client library's server-sent events parser, which `parley listen` imports
      'dist/packages/client/src/sse.js',
      'dist/dashboard/index.html',
      'LICENSE',
      'THIRD_PARTY_NOTICES.md',
      'npm-shrinkwrap.json',
      'package.json',
    ]) {
      assert.ok(files.includes(path), `${path} is in the package`);
    }
    assert.deepEqual(
      files.filter((f) => f.endsWith('.ts') || /^(src|sim|test|web|scripts|bench)\//.test(f)),
      [],
    );
  });

  it('installs no build tooling with the production dependencies', () => {
    const modules = join(dir, 'app', 'node_modules');
    assert.ok(existsSync(join(modules, 'parley', 'dist', 'src', 'cli', 'main.js')));
    for (const tool of ['typescript', 'tsx', 'vite', 'esbuild', 'rollup', 'preact']) {
      assert.equal(existsSync(join(modules, tool)), false, `${tool} is not installed`);
    }
  });

  it('`npx parley serve` answers /healthz and the dashboard, and stops on SIGTERM', async () => {
    const env = {
      ...npmFreeEnv(),
      DATA_DIR: join(dir, 'data'),
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    };
    const server = npx(['parley', 'serve'], join(dir, 'app'), env);
    stops.push(() => stopGroup(server.child, server.exited));
    const [, url = ''] = await server.output.waitFor(
      /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"msg":"parley listening"/,
      'parley listening',
      server.exited,
      120_000,
    );
    const health = await fetch(`${url}/healthz`);
    assert.equal(health.status, 200);
    const dashboard = await fetch(`${url}/dashboard/`);
    assert.equal(dashboard.status, 200);
    assert.match(await dashboard.text(), /<script type="module"[^>]* src="\/dashboard\/assets\//);
    await stopGroup(server.child, server.exited);
    assert.match(server.output.text, /"msg":"stopped"/);
  });

  it('`npx parley sim --json` prints the simulator facts line', async () => {
    const sim = npx(['parley', 'sim', '--json', '--port', '0', '--log-level', 'silent'], join(dir, 'app'), {
      ...npmFreeEnv(),
    });
    stops.push(() => stopGroup(sim.child, sim.exited));
    const [line = ''] = await sim.output.waitFor(
      /^\{"url".*\}$/m,
      'the simulator facts line',
      sim.exited,
      120_000,
    );
    const facts = JSON.parse(line) as { url: string; rootKey: string; control: string; caFile: string };
    assert.match(facts.url, /^ws:\/\/127\.0\.0\.1:\d+\/ws\/chat$/);
    assert.match(facts.rootKey, /^[0-9a-f]{64}$/);
    assert.match(facts.control, /^http:\/\/127\.0\.0\.1:\d+\/control$/);
    assert.ok(existsSync(facts.caFile), 'the media CA file exists');
    assert.match(readFileSync(facts.caFile, 'utf8'), /BEGIN CERTIFICATE/);
    await stopGroup(sim.child, sim.exited);
  });
});
