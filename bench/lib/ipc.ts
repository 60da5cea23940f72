import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Benchmark processes talk over Node's IPC channel: the runner sends `{ id, cmd, args }`, the child answers
 * `{ id, ok: true, result }` or `{ id, ok: false, error }`. One entry file (`bench/child.ts`) hosts every role.
 */

const CHILD_ENTRY = fileURLToPath(new URL('../child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Roles a benchmark child can play (see bench/roles/). */
export type Role = 'parley' | 'baseline' | 'receiver' | 'scale' | 'live-parley' | 'live-baseline' | 'network';

/** A command sent to a child. */
interface CommandMessage {
  id: number;
  cmd: string;
  args: unknown;
}

/** A child's answer to one command. */
type ReplyMessage = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/** Handlers of one role: command name → async function of its arguments. */
export type Handlers = Record<string, (args: any) => Promise<unknown>>;

/** A running benchmark child. */
export interface BenchChild {
  readonly role: Role;
  readonly pid: number;
  /**
   * Runs `cmd` in the child and resolves with its result.
   * @throws Error with the child's message when the command failed, or when the child exited first.
   */
  call<T = unknown>(cmd: string, args?: unknown, timeoutMs?: number): Promise<T>;
  /** Asks the child to close its resources and exit; kills it (SIGKILL) if it has not exited in `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startChild}. */
export interface StartOptions {
  /** Extra Node flags, e.g. `--expose-gc` or `--cpu-prof`. */
  execArgv?: string[];
  /** Extra environment variables. */
  env?: Record<string, string>;
  /**
   * Another checkout of parley to run the role from (its own `bench/child.ts` and sources), e.g. an earlier
   * commit measured beside the current code in the same run. Default: this checkout.
   */
  root?: string;
  /**
   * Run parley's own code from its TypeScript sources through tsx, as development does, instead of the compiled
   * `dist/` that `npm start` runs. Default: {@link parleyCode}'s choice for this checkout; always the sources for
   * another `root` (an earlier commit may have no build).
   */
  sources?: boolean;
}

/** The roles whose child runs parley's own code (the others are baselines, the receiver and the network). */
const PARLEY_ROLES: ReadonlySet<Role> = new Set(['parley', 'live-parley', 'scale']);

/** The hooks that load `dist/` in place of `src/` (bench/lib/compiled-sources.mjs). */
const COMPILED_SOURCES = fileURLToPath(new URL('./compiled-sources.mjs', import.meta.url));

let codeFromSources = false;

/**
 * What code this checkout's parley children run from now on: `'compiled'` (the default) the JavaScript of
 * `dist/` that `npm start` runs, which the caller must have built (`node scripts/build.js --if-stale
 * --only=server`); `'sources'` the TypeScript through tsx (`--from-sources`), whose transform keeps every
 * function's name with a call at each closure's creation.
 */
export function parleyCode(mode: 'compiled' | 'sources'): void {
  codeFromSources = mode === 'sources';
}

/**
 * Forks `bench/child.ts` in role `role` (TypeScript through tsx; parley's own code compiled, see {@link
 * parleyCode}); resolves once the child is ready.
 */
export async function startChild(role: Role, options: StartOptions = {}): Promise<BenchChild> {
  const root = options.root ?? ROOT;
  const entry =
    options.root === undefined ? CHILD_ENTRY : `${options.root.replace(/\/$/, '')}/bench/child.ts`;
  const compiled =
    PARLEY_ROLES.has(role) && options.root === undefined && !(options.sources ?? codeFromSources);
  const proc: ChildProcess = fork(entry, [role], {
    cwd: root,
    execArgv: [
      '--import',
      'tsx',
      ...(compiled ? ['--import', COMPILED_SOURCES] : []),
      ...(options.execArgv ?? []),
    ],
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    proc.once('exit', (code, signal) => {
      exited = true;
      for (const waiter of pending.values()) {
        waiter.reject(new Error(`bench child ${role} exited (code ${code}, signal ${signal})`));
      }
      pending.clear();
      resolve();
    });
  });
  proc.on('message', (raw) => {
    const message = raw as ReplyMessage;
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.ok) waiter.resolve(message.result);
    else waiter.reject(new Error(`${role}: ${message.error}`));
  });
  let nextId = 0;
  const call = <T>(cmd: string, args: unknown = {}, timeoutMs = 600_000): Promise<T> => {
    if (exited) return Promise.reject(new Error(`bench child ${role} has exited`));
    const id = ++nextId;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${role}: ${cmd} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      proc.send({ id, cmd, args } satisfies CommandMessage);
    });
  };
  await call('ready', {}, 60_000);
  return {
    role,
    pid: proc.pid ?? 0,
    call,
    async stop(graceMs = 15_000) {
      if (exited) return;
      const killer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await call('exit', {}, graceMs).catch(() => undefined);
      await exit;
      clearTimeout(killer);
    },
  };
}

/**
 * Child side: answers commands with `handlers` (plus `ready` and `exit`, which runs `handlers.close` if any and
 * exits 0). Never throws; a failing command is answered with its message.
 */
export function serveCommands(handlers: Handlers): void {
  const reply = (message: ReplyMessage) => process.send?.(message);
  // The runner is gone (crashed or killed): nothing will stop this process otherwise.
  process.once('disconnect', () => process.exit(1));
  process.on('message', (raw) => {
    const { id, cmd, args } = raw as CommandMessage;
    void (async () => {
      try {
        if (cmd === 'ready') return reply({ id, ok: true, result: { pid: process.pid } });
        if (cmd === 'exit') {
          await handlers.close?.({});
          reply({ id, ok: true, result: null });
          setImmediate(() => process.exit(0));
          return;
        }
        const handler = handlers[cmd];
        if (!handler) throw new Error(`unknown command ${cmd}`);
        reply({ id, ok: true, result: await handler(args) });
      } catch (error) {
        const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
        reply({ id, ok: false, error: text });
      }
    })();
  });
}
