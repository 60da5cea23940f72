import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sleep } from './stats.ts';

/**
 * Cluster nodes of the benchmarks: real `parley serve` processes (bin/parley.js, the command an operator runs),
 * configured by environment variables only, each on a port of its own on 127.0.0.1. Their stdout and stderr are
 * kept (the last 4,000 characters) for the error raised when a node does not become ready.
 *
 * Host names: nodes on one host judge a dead peer by its process id at their next registry heartbeat, which
 * machines of a real cluster cannot do (they wait for the peer's heartbeat to lapse). Where Linux lets this
 * process give a child a UTS namespace of its own (`unshare --uts`, as root, or inside a user namespace), each
 * node gets its own host name, so a node's death is found as on separate machines.
 */

const BIN = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A running `parley serve` node. */
export interface ClusterNodeProcess {
  /** `NODE_ID` of the node (its lease owner id). */
  readonly id: string;
  /** Base URL, `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly pid: number;
  /** True once the process has exited. */
  readonly exited: boolean;
  /** SIGKILL; resolves when the process is gone. */
  kill(): Promise<void>;
  /**
   * SIGTERM (graceful stop: a cluster node hands its instances over first); resolves with the exit code, or
   * kills the process (SIGKILL) when it has not exited within `graceMs`.
   */
  terminate(graceMs?: number): Promise<number | null>;
}

/** How nodes get a host name of their own: the `unshare` arguments that work here, or undefined (none do). */
export function hostNamePrefix(): string[] | undefined {
  for (const prefix of [['--uts'], ['--user', '--map-root-user', '--uts']]) {
    const probe = spawnSync('unshare', [...prefix, 'sh', '-c', 'hostname parley-probe && hostname'], {
      encoding: 'utf8',
      timeout: 5000,
    });
    if (probe.status === 0 && probe.stdout.trim() === 'parley-probe') return prefix;
  }
  return undefined;
}

/** A free TCP port on 127.0.0.1 (bound and released at once; loopback only, so a race is unlikely). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts `parley serve` with `env` (on top of this process's environment), `NODE_ID=id`, `HOST=127.0.0.1` and a
 * free `PORT`, and resolves once its `GET /readyz` answers 200 (store reachable and migrated, node registered).
 * With `unshare` (from {@link hostNamePrefix}) the node runs with host name `parley-<id>` (the `unshare` and shell
 * processes exec into node, so the process id is node's own). The node is killed when this process exits.
 * @throws Error with the node's last output when it exits or is not ready within `readyTimeoutMs` (it is
 *   killed then).
 */
export async function startNode(
  id: string,
  env: Record<string, string>,
  unshare: string[] | undefined,
  readyTimeoutMs = 60_000,
): Promise<ClusterNodeProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const [command, args] =
    unshare === undefined
      ? [process.execPath, [BIN, 'serve']]
      : [
          'unshare',
          [...unshare, 'sh', '-c', `hostname parley-${id} && exec "$0" "$1" serve`, process.execPath, BIN],
        ];
  const proc: ChildProcess = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, NODE_ID: id, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  let exited = false;
  let exitCode: number | null = null;
  const exit = new Promise<void>((resolve) => {
    proc.once('exit', (code) => {
      exited = true;
      exitCode = code;
      resolve();
    });
  });
  // The runner ending early (an error, Ctrl-C) must not leave nodes behind.
  const reap = () => proc.kill('SIGKILL');
  process.once('exit', reap);
  void exit.then(() => process.off('exit', reap));
  const kill = async () => {
    if (!exited) proc.kill('SIGKILL');
    await exit;
  };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) throw new Error(`node ${id} exited (code ${exitCode}) before it was ready: ${output}`);
    const ready = await fetch(`${url}/readyz`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`node ${id} not ready within ${readyTimeoutMs} ms: ${output}`);
    }
    await sleep(100);
  }
  return {
    id,
    url,
    pid: proc.pid ?? 0,
    get exited() {
      return exited;
    },
    kill,
    async terminate(graceMs = 20_000) {
      if (!exited) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
      return exitCode;
    },
  };
}
