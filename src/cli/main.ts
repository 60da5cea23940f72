import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config/config.ts';
import { DomainError } from '../domain/errors.ts';
import { describeStore, type Store } from '../store/database.ts';
import { type CliIo, type CommandContext, integer } from './commands/context.ts';
import { registerInstances } from './commands/instances.ts';
import { registerKeys } from './commands/keys.ts';
import { registerListen } from './commands/listen.ts';
import { registerOrgs } from './commands/orgs.ts';
import { registerServe, registerSim } from './commands/serve.ts';
import { registerUsers } from './commands/users.ts';
import { CliError } from './errors.ts';
import { examples } from './examples.ts';
import { LOCK_WAIT_SECONDS, openAdminStore, withAdminWrites } from './store.ts';
import { packageVersion } from './version.ts';

export type { CliIo } from './commands/context.ts';

async function readProcessStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return text;
}

/** The CLI's io on this process: its standard streams and environment (bin/parley.js adds the launcher's pid). */
export const processIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  env: process.env,
};

/** Whether `error` is an operation's failure whose message is meant for the user (every domain code but `internal`). */
function isUserFacing(error: unknown): error is DomainError {
  return error instanceof DomainError && error.code !== 'internal';
}

/**
 * The `parley` command line (docs/cli.md, docs/decisions/0022-dashboard.md): `serve`, `listen`, `sim` (listed here,
 * started by the parley command itself), `org create|list|update`, `instance create|list`, `key create|list|revoke`,
 * `user create|list|remove|reset-password`, `--version`; each command family is a module under src/cli/commands,
 * assembled here. Admin commands use the server's configuration (`DATA_DIR`, `DATABASE_URL`, read by `loadConfig`) and
 * refuse to create a store that does not exist unless `--init` is given. With `--json` every
 * admin command prints exactly one JSON object on stdout (errors: `{"error": "…"}`). An error no command mapped ends
 * as `parley: unexpected error: <message>` (or that JSON object) with exit 1, never a stack trace.
 * @returns the process exit code (0 ok, 1 failure, 2 usage error).
 */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  let json = false;
  const emit = (value: object, human: string) => io.out(json ? JSON.stringify(value) : human);

  const program = new Command('parley')
    .description('parley: self-hostable messaging session API')
    .option(
      '--init',
      'create the store (SQLite file) or apply the migrations (PostgreSQL) when it does not exist yet',
    )
    .option(
      '--lock-wait <seconds>',
      "SQLite: how long a command that writes waits for the store's write lock another process holds",
      integer('--lock-wait'),
      LOCK_WAIT_SECONDS,
    )
    .version(packageVersion(), '-V, --version', 'print the version of parley and exit')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError()
    .addHelpText('after', examples.program);

  const withStore = async <T>(run: (store: Store) => Promise<T>): Promise<T> => {
    const config = loadConfig(io.env);
    const store = await openAdminStore(config, program.opts<{ init?: boolean }>().init === true, (message) =>
      io.err(`parley: ${message}`),
    );
    try {
      return await run(store);
    } finally {
      await store.destroy();
    }
  };
  const context: CommandContext = {
    withStore,
    withStoreWrites: (run) =>
      withStore((store) =>
        withAdminWrites(
          store,
          {
            where: describeStore(loadConfig(io.env).database),
            waitSeconds: program.opts<{ lockWait: number }>().lockWait,
            onWait: (message) => io.err(`parley: ${message}`),
          },
          run,
        ),
      ),
    setJson: (value) => {
      json = value;
    },
    emit,
    readStdin: io.stdin ?? readProcessStdin,
  };

  registerServe(program, io);
  registerListen(program, io);
  registerSim(program);
  registerOrgs(program, context);
  registerInstances(program, context);
  registerKeys(program, context);
  registerUsers(program, context);

  try {
    await program.parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return 0;
      if (json || argv.includes('--json'))
        io.out(JSON.stringify({ error: error.message.replace(/^error: /, '') }));
      return 2;
    }
    if (error instanceof CliError || error instanceof ConfigError || isUserFacing(error)) {
      if (json || argv.includes('--json')) io.out(JSON.stringify({ error: error.message }));
      else io.err(`parley: ${error.message}`);
      return 1;
    }
    // Last resort: a fault nobody mapped (a driver's refusal, a bug) is one line, never a stack trace.
    const message = error instanceof Error ? error.message : String(error);
    if (json || argv.includes('--json')) io.out(JSON.stringify({ error: `unexpected error: ${message}` }));
    else io.err(`parley: unexpected error: ${message}`);
    return 1;
  }
}
