/**
 * The package `npm pack` makes, installed alone: the tarball is installed into an empty folder with production
 * dependencies only (`npm install <tarball> --omit=dev`, the registry reached for the dependencies, the npm cache
 * preferred), then `npx parley serve` must answer /healthz and `npx parley sim --json` must print its facts line,
 * with no TypeScript tooling installed (docs/decisions/0014-compiled-build-and-licences.md, docs/deploy.md).
 *
 * Slow by nature: the install compiles better-sqlite3 when no prebuilt binary can be downloaded.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

  before(() => {
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
    npm(['install', tarball, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], app);
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
