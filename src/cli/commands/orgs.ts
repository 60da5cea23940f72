import type { Command } from 'commander';
import { adminCreateOrg, adminListOrgs, adminUpdateOrg, type Organization } from '../../app/organizations.ts';
import { examples } from '../examples.ts';
import { type CommandContext, integer } from './context.ts';

/** An organization as `--json` prints it. */
function orgView(org: Organization) {
  return {
    id: org.id,
    name: org.name,
    plan: org.plan,
    perMinute: org.perMinute,
    perDay: org.perDay,
    maxInstances: org.maxInstances,
  };
}

/** One line per organization: id, name, plan and, for enterprise, its limits (and its own instance cap if set). */
function orgLine(org: Organization): string {
  const cap = org.maxInstances === null ? '' : ` ${org.maxInstances} instances`;
  const limits =
    org.plan === 'enterprise' ? ` ${org.perMinute ?? '?'}/min ${org.perDay ?? '?'}/day${cap}` : '';
  return `${org.id}  ${org.name}  ${org.plan}${limits}`;
}

/**
 * `parley org create|list|update` (docs/cli.md, docs/decisions/0019-rate-limits-and-plans.md,
 * docs/decisions/0029-instances-over-the-api.md): organizations and their plans.
 */
export function registerOrgs(program: Command, context: CommandContext): void {
  const { withStore, withStoreWrites, setJson, emit } = context;
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
    .option(
      '--max-instances <n>',
      'enterprise only: instances per environment (default 20)',
      integer('--max-instances'),
    )
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgCreate)
    .action(
      async (opts: {
        name: string;
        plan: string;
        perMinute?: number;
        perDay?: number;
        maxInstances?: number;
        json?: boolean;
      }) => {
        setJson(Boolean(opts.json));
        const created = await withStoreWrites((db) => adminCreateOrg(db, opts));
        emit(orgView(created), `organization ${created.name} (${created.plan}) created: ${created.id}`);
      },
    );
  org
    .command('list')
    .description('list every organization with its plan and limits')
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgList)
    .action(async (opts: { json?: boolean }) => {
      setJson(Boolean(opts.json));
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
    .option('--max-instances <n>', 'enterprise only: instances per environment', integer('--max-instances'))
    .option('--json', 'print one JSON object')
    .addHelpText('after', examples.orgUpdate)
    .action(
      async (
        name: string,
        opts: { plan?: string; perMinute?: number; perDay?: number; maxInstances?: number; json?: boolean },
      ) => {
        setJson(Boolean(opts.json));
        const updated = await withStoreWrites((db) => adminUpdateOrg(db, { org: name, ...opts }));
        emit(orgView(updated), `organization ${updated.name} updated: ${orgLine(updated)}`);
      },
    );
}
