/**
 * A CLI command failed for a reason of its own (a bad option value, a store that does not exist, a parley it cannot
 * reach); the message is the one line printed after `parley: ` (docs/cli.md). Failures of the operations themselves
 * arrive as `DomainError`s from src/app and are printed the same way.
 */
export class CliError extends Error {
  override name = 'CliError';
}
