import type { Command } from 'commander';
import { loadConfig } from '../../config/config.ts';
import { CliError } from '../errors.ts';
import { examples } from '../examples.ts';
import type { CliIo } from './context.ts';

/**
 * `parley serve`: the HTTP service (what `npm start` runs), configured from the environment (docs/cli.md,
 * docs/deploy.md). The server is loaded only when this command runs, so the admin commands start faster.
 */
export function registerServe(program: Command, io: CliIo): void {
  program
    .command('serve')
    .description('start the HTTP service (what npm start runs; configuration from the environment)')
    .addHelpText('after', examples.serve)
    .action(async () => {
      // Loaded here: the server (HTTP, engines, media) is not needed by the admin commands, which start faster.
      const { serve } = await import('../../server.ts');
      // npm sets `npm_lifecycle_event` for the scripts it runs (docs.npmjs.com, "scripts": environment).
      const byNpm = io.env.npm_lifecycle_event !== undefined;
      await serve(loadConfig(io.env), byNpm ? { launcherPid: io.launcherPid ?? process.ppid } : {});
    });
}

/**
 * `parley sim`: listed here so `parley --help` shows it; the parley command itself starts the simulator (it lives
 * outside src/, docs/simulator.md) before this parser runs, so reaching this action means it was not.
 * @throws CliError pointing at `npx parley sim --help` when the action runs.
 */
export function registerSim(program: Command): void {
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
}
