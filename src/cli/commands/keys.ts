import type { Command } from 'commander';
import { type ApiKeyRecord, adminCreateKey, adminListKeys, adminRevokeKey } from '../../app/api-keys.ts';
import { examples } from '../examples.ts';
import { type CommandContext, list } from './context.ts';

/** A key as `--json` lists it: never its value or hash. */
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

/**
 * `parley key create|list|revoke` (docs/cli.md, docs/decisions/0003-scopes-and-keys.md): API keys, shown once at
 * creation.
 */
export function registerKeys(program: Command, context: CommandContext): void {
  const { withStore, withStoreWrites, setJson, emit } = context;
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
        setJson(Boolean(opts.json));
        const { record, key: value } = await withStoreWrites((db) =>
          adminCreateKey(db, {
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
      setJson(Boolean(opts.json));
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
      setJson(Boolean(opts.json));
      const record = await withStoreWrites((db) => adminRevokeKey(db, id));
      emit(
        { id: record.id, revokedAt: record.revokedAt },
        `key ${record.id} revoked at ${record.revokedAt ?? ''}`,
      );
    });
}
