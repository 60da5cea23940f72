import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Migrator } from 'kysely';
import { isMigrated, openStore } from '../../src/store/database.ts';
import { migrationProvider } from '../../src/store/migrations/index.ts';
import { cleanEnv, ROOT, startParley } from '../support/parley-process.ts';

/**
 * A start that is killed (SIGKILL) in the middle of applying a migration to a SQLite store: the next start must
 * apply it again from a clean state and serve (docs/deploy.md "Upgrading": the migrations run when the new version
 * first opens the store, "and leave the store as it was if it fails"). Kysely runs SQLite migrations outside a
 * transaction, so each statement of a migration commits on its own; a crash between two of them leaves the first
 * applied but the migration unrecorded, and the next start runs the migration again from its first statement.
 */

/** Runs test/support/migrate-child.ts on `path`; resolves with its exit signal (SIGKILL when it was killed). */
function migrateUntilKilled(path: string, killAt: string): Promise<NodeJS.Signals | null> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/migrate-child.ts'], {
    cwd: ROOT,
    env: { ...cleanEnv(), CHILD_SQLITE_PATH: path, KILL_AT: killAt },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
}

/** A SQLite file in a new DATA_DIR, migrated up to `to` (an older version's store). */
async function storeAt(to: string): Promise<{ dataDir: string; path: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-interrupted-'));
  const path = join(dataDir, 'parley.db');
  const store = await openStore({ dialect: 'sqlite', path });
  const { error } = await new Migrator({ db: store.db, provider: migrationProvider }).migrateTo(to);
  await store.destroy();
  if (error) throw error;
  return { dataDir, path };
}

describe('a migration killed half-way on SQLite', () => {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  // Each case: the store's version before the upgrade, and a statement of the next migration that is not its first.
  const cases = [
    { from: '0016_instance_cap', killAt: 'create index "webhook_endpoints_instance"' },
    { from: '0020_labels', killAt: 'create index "send_jobs_due"' },
    {
      from: '0022_delivery_live_indexes',
      killAt: 'alter table "webhook_endpoints" add column "routing_stamp"',
    },
  ];
  for (const { from, killAt } of cases) {
    it(`the next start applies the migration after ${from} again and serves (killed at ${killAt})`, async () => {
      const { dataDir, path } = await storeAt(from);
      dirs.push(dataDir);
      assert.equal(
        await migrateUntilKilled(path, killAt),
        'SIGKILL',
        'the first start was killed mid-migration',
      );

      const parley = await startParley({}, dataDir);
      try {
        const ready = await fetch(`${parley.url}/readyz`);
        assert.equal(ready.status, 200);
      } finally {
        await parley.stop();
      }
    });
  }

  it('a store whose migration was interrupted is whole after the next migration (every migration recorded)', async () => {
    const { dataDir, path } = await storeAt('0016_instance_cap');
    dirs.push(dataDir);
    assert.equal(await migrateUntilKilled(path, 'alter table "webhook_attempts" add column'), 'SIGKILL');
    assert.equal(await migrateUntilKilled(path, 'never matches'), null, 'the second migration completes');
    const store = await openStore({ dialect: 'sqlite', path });
    try {
      assert.equal(await isMigrated(store), true);
    } finally {
      await store.destroy();
    }
  });
});
