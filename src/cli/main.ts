import { Command, CommanderError } from 'commander';
import { adminCreateKey, adminListKeys, adminRevokeKey } from '../app/api-keys.ts';
import { adminCreateInstance, adminListInstances } from '../app/instances.ts';
import { adminCreateOrg, adminListOrgs, adminUpdateOrg } from '../app/organizations.ts';
import { ConfigError, loadConfig } from '../config/config.ts';
import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { ApiKeyRecord } from '../store/api-keys.ts';
import type { Store } from '../store/database.ts';
import type { Organization } from '../store/organizations.ts';
import { CliError } from './errors.ts';
import { examples } from './examples.ts';
import { registerListen } from './listen.ts';
import { openAdminStore } from './store.ts';
import { registerUsers } from './users.ts';
import { packageVersion } from './version.ts';

/** Where the CLI writes; tests capture both streams. */
export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  /** All of standard input, read when a command asks for it (`--password-stdin`). */
  stdin?: () => Promise<string>;
}

async function readProcessStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return text;
}

const defaultIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  env: process.env,
};

function keyView(record: ApiKeyRecord) {
  return {
    id: record.id,
    prefix: record.prefix,
    name: record.name,
    env: record.env,
    scopes: record.scopes,
    instances: record.instanceIds,
    expiresAt: record.expiresAt,
    revokedAt: record.revokedAt,
    lastUsedAt: record.lastUsedAt,
    createdAt: record.createdAt,
  };
}

function orgView(org: Organization) {
  return { id: org.id, name: org.name, plan: org.plan, perMinute: org.perMinute, perDay: org.perDay };
}

function orgLine(org: Organization): string {
  const limits = org.plan === 'enterprise' ? ` ${org.perMinute ?? '?'}/min ${org.perDay ?? '?'}/day` : '';
  return `${org.id}  ${org.name}  ${org.plan}${limits}`;
}

function instanceView(instance: Instance) {
  return {
    id: instance.id,
    orgId: instance.orgId,
    env: instance.env,
    name: instance.name,
    phone: instance.phone,
    lastConnectedAt: instance.lastConnectedAt,
  };
}

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function integer(option: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new CliError(`${option} must be a positive integer`);
    return Number(value);
  };
}

/** Whether `error` is an operation's failure whose message is meant for the user (every domain code but `internal`). */
function isUserFacing(error: unknown): error is DomainError {
  return error instanceof DomainError && error.code !== 'internal';
}

/**
 * The `parley` command line (docs/cli.md, docs/decisions/0022-dashboard.md): `serve`, `listen`, `sim` (listed here,
 * started by the parley command itself), `org create|list|update`, `instance create|list`, `key create|list|revoke`,
 * `user create|list|remove|reset-password`, `--version`. Admin commands use the server's configuration (`DATA_DIR`, `DATABASE_URL`, read by
 * `loadConfig`) and refuse to create a store that does not exist unless `--init` is given. With `--json` every
 * admin command prints exactly one JSON object on stdout (errors: `{"error": "…"}`).
 * @returns the process exit code (0 ok, 1 failure, 2 usage error).
 */
export async function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let json = false;
  const emit = (value: object, human: string) => io.out(json ? JSON.stringify(value) : human);

  const program = new Command('parley')
    .description('parley: self-hostable messaging session API')
    .option(
      '--init',
      'create the store (SQLite file) or apply the migrations (PostgreSQL) when it does not exist yet',
    )
    .version(packageVersion(), '-V, --version', 'print the version of parley and exit')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError()
    .addHelpText('after', examples.program);

  const withStore = async <T>(run: (store: Store) => Promise<T>): Promise<T> => {
    const config = loadConfig(io.env);
    const store = await openAdminStore(config, program.opts<{ init?: boolean }>().init === true);
    try {
      return await run(store);
    } finally {
      await store.destroy();
    }
  };

  program
    .command('serve')
    .description('start the HTTP service (what npm start runs; configuration from the environment)')
    .addHelpText('after', examples.serve)
    .action(async () => {
      // Loaded here: the server (HTTP, engines, media) is not needed by the admin commands, which start faster.
      const { serve } = await import('../server.ts');
      await serve(loadConfig(io.env));
    });

  registerListen(program, io);

  program
    .command('sim')
    .description(
      'start the platform simulator: an offline stand-in for WhatsApp that live instances pair with (docs/simulator.md; npx parley sim --help)',
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(() => {
      // The parley command starts the simulator before this parser runs (it lives outside src/).
      throw new CliError('the simulator starts through the parley command: npx parley sim --help');
    });

  const org = program
    .command('org')
    .description('organizations: the accounts that own instances and keys, each on a plan')
    .addHelpText('after', examples.org);
  org
    .command('create')
    .description('create an organization on a plan (enterprise: with its own limits)')
    .requiredOption('--name <name>', 'unique organization name')
    .option('--plan <plan>', 'free | pro | enterprise', 'free')
    .option('--per-minute <n>', 'enterprise only (required): requests per minute', integer('--per-minute'))
    .option('--per-day <n>', 'enterprise only (required): requests per day', integer('--per-day'))
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgCreate)
    .action(
      async (opts: { name: string; plan: string; perMinute?: number; perDay?: number; json?: boolean }) => {
        json = Boolean(opts.json);
        const created = await withStore((s) => adminCreateOrg(s.db, opts));
        emit(orgView(created), `organization ${created.name} (${created.plan}) created: ${created.id}`);
      },
    );
  org
    .command('list')
    .description('list every organization with its plan and limits')
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgList)
    .action(async (opts: { json?: boolean }) => {
      json = Boolean(opts.json);
      const organizations = await withStore((s) => adminListOrgs(s.db));
      emit({ organizations: organizations.map(orgView) }, organizations.map(orgLine).join('\n') || '(none)');
    });
  org
    .command('update')
    .description("change an organization's plan or its enterprise limits")
    .argument('<org>', 'organization id or name')
    .option('--plan <plan>', 'free | pro | enterprise (default: keep the current plan)')
    .option('--per-minute <n>', 'enterprise only: requests per minute', integer('--per-minute'))
    .option('--per-day <n>', 'enterprise only: requests per day', integer('--per-day'))
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgUpdate)
    .action(
      async (name: string, opts: { plan?: string; perMinute?: number; perDay?: number; json?: boolean }) => {
        json = Boolean(opts.json);
        const updated = await withStore((s) => adminUpdateOrg(s.db, { org: name, ...opts }));
        emit(orgView(updated), `organization ${updated.name} updated: ${orgLine(updated)}`);
      },
    );

  const instance = program
    .command('instance')
    .description('instances: one linked WhatsApp number each, test (sandbox) or live')
    .addHelpText('after', examples.instance);
  instance
    .command('create')
    .description('create an instance of an organization in the test or live environment')
    .addHelpText('after', examples.instanceCreate)
    .requiredOption('--org <org>', 'organization id or name')
    .requiredOption('--env <env>', 'test | live')
    .option('--name <name>', 'display name')
    .option('--json', 'print one JSON object')
    .action(async (opts: { org: string; env: string; name?: string; json?: boolean }) => {
      json = Boolean(opts.json);
      const created = await withStore((s) => adminCreateInstance(s.db, opts));
      emit(
        { id: created.id, orgId: created.orgId, env: created.env, name: created.name },
        `${created.env} instance ${created.name} created: ${created.id}`,
      );
    });
  instance
    .command('list')
    .description("list an organization's instances with their linked numbers")
    .addHelpText('after', examples.instanceList)
    .requiredOption('--org <org>', 'organization id or name')
    .option('--json', 'print one JSON object')
    .action(async (opts: { org: string; json?: boolean }) => {
      json = Boolean(opts.json);
      const instances = (await withStore((s) => adminListInstances(s.db, opts.org))).map(instanceView);
      emit(
        { instances },
        instances.map((i) => `${i.id}  ${i.env}  ${i.name}  ${i.phone ?? '(not linked)'}`).join('\n') ||
          '(none)',
      );
    });

  const key = program
    .command('key')
    .description('API keys: svc_test_… or svc_live_…, shown once at creation')
    .addHelpText('after', examples.key);
  key
    .command('create')
    .description('create an API key (printed once; only its hash is stored)')
    .addHelpText('after', examples.keyCreate)
    .requiredOption('--org <org>', 'organization id or name')
    .requiredOption('--env <env>', 'test | live')
    .option('--name <name>', 'display name')
    .option('--scopes <list>', 'comma-separated scopes', 'chat:*')
    .option('--instances <ids>', 'comma-separated instance ids the key may address (default: all)')
    .option('--expires-in <duration>', 'e.g. 90s, 10m, 12h, 30d')
    .option('--json', 'print one JSON object')
    .action(
      async (opts: {
        org: string;
        env: string;
        name?: string;
        scopes: string;
        instances?: string;
        expiresIn?: string;
        json?: boolean;
      }) => {
        json = Boolean(opts.json);
        const { record, key: value } = await withStore((s) =>
          adminCreateKey(s.db, {
            org: opts.org,
            env: opts.env,
            ...(opts.name === undefined ? {} : { name: opts.name }),
            scopes: list(opts.scopes) ?? [],
            instances: list(opts.instances) ?? [],
            ...(opts.expiresIn === undefined ? {} : { expiresIn: opts.expiresIn }),
          }),
        );
        emit(
          {
            id: record.id,
            key: value,
            prefix: record.prefix,
            env: record.env,
            scopes: record.scopes,
            instances: record.instanceIds,
            expiresAt: record.expiresAt,
          },
          `key ${record.id} created (shown once, store it now):\n${value}`,
        );
      },
    );
  key
    .command('list')
    .description("list an organization's keys (never their values)")
    .addHelpText('after', examples.keyList)
    .requiredOption('--org <org>', 'organization id or name')
    .option('--json', 'print one JSON object')
    .action(async (opts: { org: string; json?: boolean }) => {
      json = Boolean(opts.json);
      const keys = (await withStore((s) => adminListKeys(s.db, opts.org))).map(keyView);
      emit(
        { keys },
        keys
          .map(
            (k) => `${k.id}  ${k.prefix}…  ${k.env}  ${k.scopes.join(',')}${k.revokedAt ? '  revoked' : ''}`,
          )
          .join('\n') || '(none)',
      );
    });
  key
    .command('revoke')
    .description('revoke a key: it is refused from then on')
    .addHelpText('after', examples.keyRevoke)
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(async (id: string, opts: { json?: boolean }) => {
      json = Boolean(opts.json);
      const record = await withStore((s) => adminRevokeKey(s.db, id));
      emit(
        { id: record.id, revokedAt: record.revokedAt },
        `key ${record.id} revoked at ${record.revokedAt ?? ''}`,
      );
    });

  registerUsers(program, {
    withStore,
    setJson: (value) => {
      json = value;
    },
    emit,
    readStdin: io.stdin ?? readProcessStdin,
  });

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
    throw error;
  }
}
