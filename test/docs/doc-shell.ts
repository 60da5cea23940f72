/**
 * The shell a docs page runs in, one step at a time, and the wait for a background block's output (docs.test.ts
 * gives the convention).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../support/parley-process.ts';
import { hasLine } from './doc-pages.ts';

/**
 * A shell function `npx` that runs `npx parley …` as the project's own bin (package.json `bin`: bin/parley.js) with
 * this Node, and passes any other package to npm's npx. npm's package lookup cost about 1.2 s of a core at every
 * call on the 2-core machine (1.8 s against 0.6 s for the bin itself), and the pages call `npx parley` tens of times;
 * that `npx parley` resolves to bin/parley.js from the project root is test/cli/cli.test.ts's to show. Exported, so
 * subshells and `bash -c` see it too.
 */
const NPX_PARLEY = [
  `npx() { if [ "\${1-}" = parley ]; then shift; ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, 'bin/parley.js'))} "$@"; else command npx "$@"; fi; }`,
  'export -f npx',
  '',
].join('\n');

/** A bash that runs steps one at a time and reports each step's output and status (`npx parley` as {@link NPX_PARLEY}). */
export class Shell {
  readonly #child: ChildProcess;
  #buffer = '';
  #wake: (() => void) | undefined;
  readonly exited: Promise<number | null>;

  constructor(env: Record<string, string>) {
    this.#child = spawn('bash', ['--noprofile', '--norc'], { cwd: ROOT, env, stdio: 'pipe' });
    const add = (chunk: Buffer) => {
      this.#buffer += chunk.toString('utf8');
      this.#wake?.();
    };
    this.#child.stdout?.on('data', add);
    this.#child.stderr?.on('data', add);
    this.exited = new Promise((resolve) => this.#child.once('exit', (code) => resolve(code)));
    void this.exited.then(() => this.#wake?.());
    this.#child.stdin?.write('set -euo pipefail -m\n');
    this.#child.stdin?.write(NPX_PARLEY);
  }

  /**
   * Runs `code` in the shell (stdin closed for the commands) and returns its output.
   * @throws Error when the shell exits (a command failed) or the step passes `timeoutMs`.
   */
  async run(code: string, timeoutMs = 60_000): Promise<string> {
    const marker = `@@docs-step-${Math.random().toString(36).slice(2)}@@`;
    this.#buffer = '';
    this.#child.stdin?.write(`{\n${code}\n} </dev/null\nprintf '\\n%s\\n' '${marker}'\n`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const at = this.#buffer.indexOf(marker);
      if (at >= 0) return this.#buffer.slice(0, at);
      if (this.#child.exitCode !== null) {
        throw new Error(`exited with status ${this.#child.exitCode}; output:\n${this.#buffer}`);
      }
      if (Date.now() > deadline)
        throw new Error(`still running after ${timeoutMs} ms; output:\n${this.#buffer}`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 200);
      });
    }
  }

  async close(): Promise<void> {
    this.#child.stdin?.end();
    await this.exited;
  }
}

/** Waits until `read()` has a line matching `pattern`. */
export async function eventually(
  read: () => string,
  pattern: RegExp,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!hasLine(read(), pattern)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${read()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
