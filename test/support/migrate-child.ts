/**
 * A process that migrates a store and is killed (SIGKILL, by itself) just before the first statement whose SQL
 * contains env `KILL_AT`, for tests of a migration interrupted by a crash (an OOM kill, a container stopped past its
 * grace period, a power loss). The store is env `CHILD_SQLITE_PATH` (a SQLite file) or env `DATABASE_URL`
 * (PostgreSQL). Prints `migrated` and exits 0 when no statement matched.
 */
import { migrateToLatest, openStore } from '../../src/store/database.ts';

const killAt = process.env.KILL_AT ?? '';
const path = process.env.CHILD_SQLITE_PATH;
const url = process.env.DATABASE_URL;
const store = await openStore(
  path !== undefined ? { dialect: 'sqlite', path } : { dialect: 'postgres', url: url ?? '' },
  {
    faults: (text) => {
      if (killAt !== '' && text.includes(killAt)) process.kill(process.pid, 'SIGKILL');
    },
  },
);
await migrateToLatest(store);
await store.destroy();
process.stdout.write('migrated\n');
