import { existsSync } from 'node:fs';
import type { Config } from '../config/config.ts';
import { DomainError } from '../domain/errors.ts';
import {
  describeStore,
  isInitialised,
  LOCK_WAIT_MESSAGE,
  migrateToLatest,
  openStore,
  type Store,
  StoreTooNewError,
  storeFailure,
} from '../store/database.ts';
import { isSqliteBusy } from '../store/migrate.ts';
import { CliError } from './errors.ts';

/**
 * Opens the store an admin command works on: the server's store, found through the same configuration
 * (`DATA_DIR`, `DATABASE_URL`), migrated to the latest version like the server does at boot.
 *
 * A store that does not exist is created only when `init` is true (`--init`): without it, a CLI run from the
 * wrong folder would silently create an empty `./data/parley.db` and then report the server's organizations as
 * missing. "Does not exist" means: no SQLite file at the configured path (or a file without parley's tables),
 * or a PostgreSQL database whose migrations were never applied.
 * @throws CliError naming the store it looked for and how to point at the right one; or, when the store cannot be
 *   opened, one line naming the cause and the setting to change, as `parley serve` does (`storeFailure`,
 *   docs/decisions/0011-store-faults.md).
 * @param onLockWait told (a line for stderr) while a migration waits for a SQLite write lock another process holds.
 */
export async function openAdminStore(
  config: Config,
  init: boolean,
  onLockWait: (message: string) => void = () => undefined,
): Promise<Store> {
  const database = config.database;
  const where = describeStore(database);
  if (database.dialect === 'sqlite' && database.path !== ':memory:' && !existsSync(database.path) && !init) {
    throw new CliError(
      `no parley store at ${database.path}. ${pointer(config)} Or pass --init to create a new, empty store there.`,
    );
  }
  let store: Store;
  try {
    store = await openStore(database);
  } catch (error) {
    // The cause and the setting that fixes it, as `parley serve` says them (no such database, a refused sign-in, an
    // unreachable server), not the store-fault message a request gets ("retry shortly").
    throw new CliError(storeFailure(database, error));
  }
  try {
    if (!init && !(await isInitialised(store))) {
      throw new CliError(
        `the ${where} has no parley tables (its migrations were never applied). ${pointer(config)} ` +
          'Or start the server once against it (npm start applies the migrations), or pass --init to apply them now.',
      );
    }
    await migrateToLatest(store, { onLockWait: () => onLockWait(LOCK_WAIT_MESSAGE) });
    return store;
  } catch (error) {
    await store.destroy();
    // A store of a newer version, or one lost right after it opened: said as `parley serve` says it.
    if (
      error instanceof StoreTooNewError ||
      isSqliteBusy(error) ||
      (error instanceof DomainError && error.code === 'store_unavailable')
    )
      throw new CliError(storeFailure(database, error));
    throw error;
  }
}

/** How to point the CLI at the server's store, naming the setting in use. */
function pointer(config: Config): string {
  const setting =
    config.database.dialect === 'postgres'
      ? 'DATABASE_URL is set'
      : config.database.path.startsWith(config.dataDir)
        ? `DATA_DIR resolves to ${config.dataDir}; unset, it is ./data in the current folder`
        : 'DATABASE_URL names a SQLite file';
  return (
    `The CLI uses the server's configuration (${setting}): run it with the same DATA_DIR (the folder holding ` +
    "the server's parley.db, e.g. DATA_DIR=/srv/parley/data npx parley org list) or the same DATABASE_URL " +
    '(postgres://… or sqlite:PATH) as the server.'
  );
}
