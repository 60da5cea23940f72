import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The project root (where `npm start` runs). */
export const ROOT = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');

/** A child process's output so far, and a way to wait for a line in it. */
export class Output {
  text = '';
  readonly #waiters = new Set<() => void>();

  constructor(child: ChildProcess) {
    const add = (chunk: Buffer) => {
      this.text += chunk.toString('utf8');
      for (const waiter of this.#waiters) waiter();
    };
    child.stdout?.on('data', add);
    child.stderr?.on('data', add);
  }

  /**
   * Resolves with the first match of `pattern` in the output; rejects after `timeoutMs` or when `exited`
   * resolves first, quoting the output.
   */
  waitFor(
    pattern: RegExp,
    what: string,
    exited: Promise<unknown>,
    timeoutMs = 30_000,
  ): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = this.text.match(pattern);
        if (!match) return false;
        done();
        resolve(match);
        return true;
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${what}; output:\n${this.text}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
      };
      const waiter = () => void check();
      if (check()) return;
      this.#waiters.add(waiter);
      void exited.then(() => {
        if (check()) return;
        done();
        reject(new Error(`the process exited before ${what}; output:\n${this.text}`));
      });
    });
  }
}

/** A parley started as `npm start` starts it (`node bin/parley.js serve`) on a fresh DATA_DIR. */
export interface ParleyProcess {
  /** Base URL, `http://127.0.0.1:<port>`. */
  url: string;
  host: string;
  port: number;
  /** The test key printed at first boot. */
  key: string;
  /** The fresh data directory (removed by stop). */
  dataDir: string;
  /** Environment the server was started with (DATA_DIR included): CLI commands use the same. */
  env: Record<string, string>;
  output: Output;
  /** SIGTERM, wait for exit (code returned), remove the data directory. */
  stop(): Promise<number | null>;
}

/** The environment of the test process without the variables that would point parley elsewhere. */
export function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (/^(DATABASE_URL|REDIS_URL|SECRET_KEY|PUBLIC_URL|PORT|HOST|DATA_DIR|FFMPEG_PATH)$/.test(name))
      continue;
    if (/^(WEBHOOK_|OUTBOUND_|CHILD_|NODE_TEST)/.test(name)) continue;
    env[name] = value;
  }
  return env;
}

/**
 * Starts parley in a child process on 127.0.0.1 and a free port with a fresh DATA_DIR (or `dataDir`), waits
 * until it listens and captures the first-boot key from its banner.
 * @param extraEnv more settings (e.g. WEBHOOK_ALLOWED_CIDRS, OUTBOUND_CA_FILE).
 */
export async function startParley(
  extraEnv: Record<string, string> = {},
  dataDir = mkdtempSync(join(tmpdir(), 'parley-proc-')),
): Promise<ParleyProcess> {
  const env = {
    ...cleanEnv(),
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...extraEnv,
  };
  const child = spawn(process.execPath, ['bin/parley.js', 'serve'], { cwd: ROOT, env, stdio: 'pipe' });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const output = new Output(child);
  const [listening = '', url = '', port = '0'] = await output.waitFor(
    /"url":"(http:\/\/127\.0\.0\.1:(\d+))".*"msg":"parley listening"/,
    'parley listening',
    exited,
  );
  // The first boot's banner follows the listening line.
  const [key = ''] = listening.includes('"firstBoot":true')
    ? await output.waitFor(/svc_test_[0-9A-Za-z]{38}/, 'the first-boot key', exited)
    : [];
  return {
    url,
    host: '127.0.0.1',
    port: Number(port),
    key,
    dataDir,
    env,
    output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      // graceful shutdown takes at most SHUTDOWN_TIMEOUT_SECONDS (10 s); past 20 s it is stuck: kill it
      const stuck = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(stuck);
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

/** A platform simulator started as `parley sim --json` starts it (`node bin/parley.js sim`). */
export interface SimulatorProcess {
  /** The WebSocket URL, `ws://127.0.0.1:<port>/ws/chat` (parley's PLATFORM_URL). */
  url: string;
  /** The root key, 64 hex characters (parley's PLATFORM_ROOT_KEY). */
  rootKey: string;
  /** The control API's base URL, `http://127.0.0.1:<port>/control`. */
  control: string;
  /** PEM file of the media server's CA (parley's PLATFORM_CA_FILE), removed when the simulator exits. */
  caFile: string;
  output: Output;
  /** SIGTERM, wait for exit (code returned; SIGKILL after 10 s). */
  stop(): Promise<number | null>;
}

/**
 * Starts `parley sim --json` in a child process on a free port and reads the facts from its first stdout line,
 * as a reader copies them.
 * @throws Error when the simulator exits or prints nothing within 30 s.
 */
export async function startSimulatorProcess(): Promise<SimulatorProcess> {
  const child = spawn(process.execPath, ['bin/parley.js', 'sim', '--json', '--log-level', 'silent'], {
    cwd: ROOT,
    env: cleanEnv(),
    stdio: 'pipe',
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const output = new Output(child);
  const [line = ''] = await output.waitFor(/^\{"url".*\}$/m, 'the simulator facts line', exited);
  const facts = JSON.parse(line) as { url: string; rootKey: string; control: string; caFile: string };
  return {
    ...facts,
    output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const stuck = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(stuck);
      return code;
    },
  };
}

/** What a `parley serve` that ended printed, and its exit code. */
export interface EndedServe {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `parley serve` with `env` on a fresh DATA_DIR (`prepare` may write into it first) and LOG_LEVEL=info; resolves when
 * it exits. A start that does not fail would run forever: the calling test's own timeout reports it.
 */
export function serveUntilExit(
  env: Record<string, string>,
  prepare?: (dataDir: string) => void,
): Promise<EndedServe> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-start-'));
  prepare?.(dataDir);
  return new Promise<EndedServe>((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
      cwd: ROOT,
      env: { ...cleanEnv(), DATA_DIR: dataDir, HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
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

/** Exit 1, exactly one line on stderr matching `line`, and no stack frame anywhere (docs/deploy.md "Start-up errors"). */
export function assertOneLineFailure(result: EndedServe, line: RegExp): void {
  assert.equal(result.code, 1, `${result.stdout}\n${result.stderr}`);
  const lines = result.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `one line on stderr: ${result.stderr}`);
  assert.match(lines[0] ?? '', line);
  assert.doesNotMatch(`${result.stdout}${result.stderr}`, /\n\s+at /, 'no stack frames');
}
