import { existsSync } from 'node:fs';
import type { Kysely } from 'kysely';
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
import type { Database } from '../store/schema.ts';
import { WriteLockTimeout, withWriteLock } from '../store/write-lock.ts';
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

/** Default of `--lock-wait`, seconds: how long a command that writes waits for SQLite's write lock (docs/cli.md). */
export const LOCK_WAIT_SECONDS = 60;

/** How long a command waits for SQLite's write lock before it says it is waiting, ms (docs/cli.md). */
export const LOCK_NOTICE_MS = 3_000;

/**
 * Runs `run`, a command's writes, on `store` (docs/cli.md "Beside a running server",
 * docs/decisions/0109-cli-writes-wait-for-the-write-lock.md): in one transaction that waits up to `waitSeconds` for
 * the SQLite write lock another process holds, `onWait` told (a line for stderr) after {@link LOCK_NOTICE_MS}.
 * @param where the store as messages name it ({@link describeStore}).
 * @throws CliError naming the lock, the store and the wait when the lock stayed held for the whole wait (nothing was
 *   written); whatever `run` throws (its writes rolled back).
 */
export async function withAdminWrites<T>(
  store: Store,
  options: { where: string; waitSeconds: number; onWait: (message: string) => void },
  run: (db: Kysely<Database>) => Promise<T>,
): Promise<T> {
  const { where, waitSeconds, onWait } = options;
  try {
    return await withWriteLock(
      store,
      {
        waitMs: waitSeconds * 1000,
        noticeAfterMs: LOCK_NOTICE_MS,
        onWait: () =>
          onWait(
            "another process holds the store's write lock (the server writing, a sqlite3 session?): " +
              `waiting up to ${waitSeconds} s for it`,
          ),
      },
      run,
    );
  } catch (error) {
    if (!(error instanceof WriteLockTimeout)) throw error;
    throw new CliError(
      `gave up after ${waitSeconds} s waiting for the write lock of the ${where}, which another process holds ` +
        '(the server writing, a sqlite3 session, another parley command): nothing was changed; try again, or wait ' +
        'longer with --lock-wait <seconds>',
    );
  }
}
