import { Command, CommanderError } from 'commander';
import {
  AdminError,
  adminCreateInstance,
  adminCreateKey,
  adminCreateOrg,
  adminListInstances,
  adminListKeys,
  adminRevokeKey,
} from '../admin/admin.ts';
import { ConfigError, loadConfig } from '../config/config.ts';
import { serve } from '../server.ts';
import type { ApiKeyRecord } from '../store/api-keys.ts';
import { migrateToLatest, openStore, type Store } from '../store/database.ts';
import type { Instance } from '../store/instances.ts';
import { registerListen } from './listen.ts';

/** Where the CLI writes; tests capture both streams. */
export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
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
    if (!/^\d+$/.test(value)) throw new AdminError(`${option} must be a positive integer`);
    return Number(value);
  };
}

/**
 * The `parley` command line (DESIGN D3): `serve`, `org create`, `instance create|list`, `key create|list|revoke`.
 * With `--json` every admin command prints exactly one JSON object on stdout (errors: `{"error": "…"}`).
 * @returns the process exit code (0 ok, 1 failure, 2 usage error).
 */
export async function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let json = false;
  const emit = (value: object, human: string) => io.out(json ? JSON.stringify(value) : human);
  const withStore = async <T>(run: (store: Store) => Promise<T>): Promise<T> => {
    const config = loadConfig(io.env);
    const store = await openStore(config.database);
    try {
      await migrateToLatest(store);
      return await run(store);
    } finally {
      await store.destroy();
    }
  };

  const program = new Command('parley')
    .description('parley: self-hostable messaging session API')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .showHelpAfterError();

  program
    .command('serve')
    .description('start the HTTP service (configuration from the environment; see README)')
    .action(async () => {
      await serve(loadConfig(io.env));
    });

  registerListen(program, io);

  const org = program.command('org').description('organizations');
  org
    .command('create')
    .requiredOption('--name <name>', 'unique organization name')
    .option('--plan <plan>', 'free | pro | enterprise', 'free')
    .option('--per-minute <n>', 'enterprise: requests per minute', integer('--per-minute'))
    .option('--per-day <n>', 'enterprise: requests per day', integer('--per-day'))
    .option('--json', 'print one JSON object')
    .action(
      async (opts: { name: string; plan: string; perMinute?: number; perDay?: number; json?: boolean }) => {
        json = Boolean(opts.json);
        const created = await withStore((s) => adminCreateOrg(s.db, opts));
        emit(
          {
            id: created.id,
            name: created.name,
            plan: created.plan,
            perMinute: created.perMinute,
            perDay: created.perDay,
          },
          `organization ${created.name} (${created.plan}) created: ${created.id}`,
        );
      },
    );

  const instance = program.command('instance').description('instances (linked numbers)');
  instance
    .command('create')
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

  const key = program.command('key').description('API keys');
  key
    .command('create')
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
    if (error instanceof AdminError || error instanceof ConfigError) {
      if (json || argv.includes('--json')) io.out(JSON.stringify({ error: error.message }));
      else io.err(`parley: ${error.message}`);
      return 1;
    }
    throw error;
  }
}
