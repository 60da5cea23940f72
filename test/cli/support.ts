import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.ts';
import { Output, ROOT as PROJECT } from '../support/parley-process.ts';
import type { TestStore } from '../support/store.ts';

/** Running the `parley` binary as a user does, for the CLI suites. */

const BIN = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What a CLI run printed and how it exited. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The one JSON object stdout holds (asserted to be exactly one line). */
  json: any;
}

/** Runs `parley …args` in a child process with exactly `env` on top of PATH and HOME. */
export async function cli(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  const result = await cliLines(env, ...args);
  let json: unknown;
  if (args.includes('--json')) {
    const lines = result.stdout.split('\n').filter((line) => line !== '');
    assert.equal(lines.length, 1, `exactly one JSON line on stdout for ${args.join(' ')}: ${result.stdout}`);
    json = JSON.parse(lines[0] ?? '');
  }
  return { ...result, json };
}

/**
 * Runs `parley …args` as {@link cli} does, for a command that prints any number of lines (`parley listen --json`
 * prints one JSON object per event): `json` is left undefined.
 */
export function cliLines(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
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
    child.once('close', (code) => resolve({ code, stdout, stderr, json: undefined }));
  });
}

/**
 * Runs `parley …args` in this process (src/cli/main.ts `main`) with exactly `env`: its exit code and the lines it
 * wrote to stdout (`out`) and stderr (`err`). For suites that hold a lock or a store of this process around the run.
 */
export async function cliInProcess(
  env: Record<string, string>,
  ...args: string[]
): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(['node', 'parley', ...args], {
    out: (text) => out.push(text),
    err: (text) => err.push(text),
    env,
  });
  return { code, out, err };
}

/** The environment that points the CLI at `testStore`, as a server's environment would. */
export function storeEnv(testStore: TestStore): Record<string, string> {
  if (testStore.database.dialect === 'sqlite') return { DATA_DIR: testStore.dataDir };
  return {
    DATA_DIR: testStore.dataDir,
    DATABASE_URL: postgresUrl(testStore.schema ?? 'public', testStore.database.url),
  };
}

/**
 * `base` (TEST_DATABASE_URL unless told) with `search_path` set to `schema` (how an operator puts parley in its own
 * schema).
 */
export function postgresUrl(schema: string, base = process.env.TEST_DATABASE_URL ?? ''): string {
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

/** The stored plan columns of organization `name`, or undefined when there is none. */
export async function organizationRow(testStore: TestStore, name: string) {
  return testStore.store.db
    .selectFrom('organizations')
    .select(['name', 'plan', 'per_minute', 'per_day', 'max_instances'])
    .where('name', '=', name)
    .executeTakeFirst();
}

/**
 * Another process holding a write transaction on SQLite file `path` (`statement` run in it) until `release` tells it to
 * commit; resolves once it holds the lock.
 */
export async function holdWriteLock(path: string, statement: string) {
  const holder = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(${JSON.stringify(path)});
       db.pragma('journal_mode = WAL');
       db.exec('begin immediate'); db.exec(${JSON.stringify(statement)});
       console.log('holding');
       process.stdin.once('data', () => { db.exec('commit'); db.close(); process.exit(0); });`,
    ],
    { cwd: PROJECT, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<number | null>((resolve) => holder.once('exit', (code) => resolve(code)));
  await new Output(holder).waitFor(/holding/, 'the lock held', exited);
  return {
    release: async () => {
      holder.stdin?.write('commit\n');
      assert.equal(await exited, 0);
    },
  };
}
