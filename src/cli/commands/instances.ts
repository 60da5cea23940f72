import type { Command } from 'commander';
import { adminCreateInstance, adminListInstances } from '../../app/instances.ts';
import type { Instance } from '../../domain/instance.ts';
import { examples } from '../examples.ts';
import type { CommandContext } from './context.ts';

/** An instance as `--json` prints it. */
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

/** `parley instance create|list` (docs/cli.md): an organization's instances, test (sandbox) or live. */
export function registerInstances(program: Command, context: CommandContext): void {
  const { withStore, withStoreWrites, setJson, emit } = context;
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
      setJson(Boolean(opts.json));
      const created = await withStoreWrites((db) => adminCreateInstance(db, opts));
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
      setJson(Boolean(opts.json));
      const instances = (await withStore((s) => adminListInstances(s.db, opts.org))).map(instanceView);
      emit(
        { instances },
        instances.map((i) => `${i.id}  ${i.env}  ${i.name}  ${i.phone ?? '(not linked)'}`).join('\n') ||
          '(none)',
      );
    });
}
