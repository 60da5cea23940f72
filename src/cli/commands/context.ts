import type { Kysely } from 'kysely';
import type { Store } from '../../store/database.ts';
import type { Database } from '../../store/schema.ts';
import { CliError } from '../errors.ts';

/** Where the CLI writes; tests capture both streams. */
export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  /** All of standard input, read when a command asks for it (`--password-stdin`). */
  stdin?: () => Promise<string>;
  /**
   * The pid of the process that started this one, read as the process began (bin/parley.js reads it before its
   * build step); `process.ppid` now when absent. `parley serve` started by npm stops once that process is gone.
   */
  launcherPid?: number;
}

/** What the admin command families get from the CLI's main: the store opener and the output switch. */
export interface CommandContext {
  /** Runs `run` on the server's store (opened per docs/cli.md, `--init` honoured) and closes it afterwards. */
  withStore: <T>(run: (store: Store) => Promise<T>) => Promise<T>;
  /**
   * Runs `run`, a command that writes, on the server's store as {@link withStore} opens it, in one transaction that
   * waits for SQLite's write lock (`--lock-wait`, docs/cli.md "Beside a running server"): all of its writes are kept
   * or none. @throws CliError naming the lock when it stayed held for the whole wait.
   */
  withStoreWrites: <T>(run: (db: Kysely<Database>) => Promise<T>) => Promise<T>;
  /** Sets whether this command prints JSON (its `--json`). */
  setJson: (json: boolean) => void;
  /** Prints `value` as JSON or `human` as text, as the command's `--json` says. */
  emit: (value: object, human: string) => void;
  /** Reads all of standard input (`--password-stdin`). */
  readStdin: () => Promise<string>;
}

/** A comma-separated option as its trimmed, non-empty items; undefined when the option was not given. */
export function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * A commander option parser for a whole number of at least 0 written in digits.
 * @throws CliError `<option> must be a positive integer`.
 */
export function integer(option: string): (value: string) => number {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new CliError(`${option} must be a positive integer`);
    return Number(value);
  };
}
