import type { Command } from 'commander';
import {
  adminCreateUser,
  adminListUsers,
  adminRemoveUser,
  adminResetPassword,
  type UserView,
} from '../../app/users.ts';
import { CliError } from '../errors.ts';
import { examples } from '../examples.ts';
import type { CommandContext } from './context.ts';

function userLine(user: UserView): string {
  return `${user.id}  ${user.email}  ${user.role}  last sign-in ${user.lastSignInAt ?? 'never'}`;
}

/**
 * `parley user create|list|remove|reset-password` (docs/decisions/0022-dashboard.md, docs/cli.md): the dashboard's
 * users. `create` generates the password and prints it once (only its Argon2id hash is stored); `remove` signs the
 * user's browsers out; `reset-password` gives a new password (generated and printed once, or read from standard input
 * with `--password-stdin`) and signs the user's browsers out.
 */
export function registerUsers(program: Command, context: CommandContext): void {
  const { withStore, withStoreWrites, setJson, emit, readStdin } = context;
  const user = program
    .command('user')
    .description('dashboard users: e-mail and password, one organization and a role each')
    .addHelpText('after', examples.user);
  user
    .command('create')
    .description('add a dashboard user (its password is generated and printed once)')
    .addHelpText('after', examples.userCreate)
    .requiredOption('--org <org>', 'organization id or name')
    .requiredOption('--email <email>', 'the e-mail address the user signs in with')
    .requiredOption('--role <role>', 'owner | member | viewer')
    .option('--json', 'print one JSON object')
    .action(async (opts: { org: string; email: string; role: string; json?: boolean }) => {
      setJson(Boolean(opts.json));
      const created = await withStoreWrites((db) => adminCreateUser(db, opts));
      emit(
        { ...created.user, password: created.password },
        `user ${created.user.email} (${created.user.role}) created: ${created.user.id}\n` +
          `password (shown once, store it now):\n${created.password}`,
      );
    });
  user
    .command('list')
    .description("list an organization's dashboard users (every organization's without --org)")
    .addHelpText('after', examples.userList)
    .option('--org <org>', 'organization id or name')
    .option('--json', 'print one JSON object')
    .action(async (opts: { org?: string; json?: boolean }) => {
      setJson(Boolean(opts.json));
      const users = await withStore((s) => adminListUsers(s.db, opts.org));
      emit({ users }, users.map(userLine).join('\n') || '(none)');
    });
  user
    .command('remove')
    .description('remove a dashboard user and sign out its browsers')
    .addHelpText('after', examples.userRemove)
    .argument('<user>', 'user id or e-mail address')
    .option('--json', 'print one JSON object')
    .action(async (idOrEmail: string, opts: { json?: boolean }) => {
      setJson(Boolean(opts.json));
      const removed = await withStoreWrites((db) => adminRemoveUser(db, idOrEmail));
      emit({ id: removed.id, email: removed.email, removed: true }, `user ${removed.email} removed`);
    });
  user
    .command('reset-password')
    .description("give a user a new password (printed once) and sign out all of the user's browsers")
    .addHelpText('after', examples.userResetPassword)
    .requiredOption('--email <email>', 'the e-mail address the user signs in with')
    .option('--password-stdin', 'read the new password from standard input instead of generating one')
    .option('--json', 'print one JSON object')
    .action(async (opts: { email: string; passwordStdin?: boolean; json?: boolean }) => {
      setJson(Boolean(opts.json));
      let password: string | undefined;
      if (opts.passwordStdin) {
        password = (await readStdin()).replace(/\r?\n$/, '');
        if (password === '') throw new CliError('--password-stdin: standard input holds no password');
      }
      const reset = await withStoreWrites((db) =>
        adminResetPassword(db, { user: opts.email, ...(password === undefined ? {} : { password }) }),
      );
      const { email, id } = reset.user;
      emit(
        { id, email, ...(reset.generated ? { password: reset.password } : {}), sessionsEnded: true },
        reset.generated
          ? `password of ${email} reset; its browsers are signed out\npassword (shown once, store it now):\n${reset.password}`
          : `password of ${email} set; its browsers are signed out`,
      );
    });
}
