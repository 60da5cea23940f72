import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { assertOneLineFailure, serveUntilExit } from '../support/parley-process.ts';

/**
 * An older parley started against a store a newer version migrated (docs/deploy.md "Upgrading": nodes are upgraded
 * one at a time, so an old node that restarts mid-rollout, or a rollback, meets the newer store). It must refuse to
 * start, with one line that says the store is newer than this version and what to do, not call the store
 * "corrupted" and point at DATA_DIR / DATABASE_URL, which are right.
 */
describe('a store migrated by a newer version', () => {
  let dir: string;
  let file: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'parley-newer-'));
    file = join(dir, 'parley.db');
    const store = await openStore({ dialect: 'sqlite', path: file });
    await migrateToLatest(store);
    // What a newer version's start leaves: a migration this version does not know, recorded after the others.
    await store.db
      .insertInto('kysely_migration' as never)
      .values({ name: '9999_from_a_newer_version', timestamp: new Date().toISOString() } as never)
      .execute();
    await store.destroy();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is refused at start with one line naming the newer migration, not "corrupted" nor the settings', async () => {
    const result = await serveUntilExit({ PORT: '0' }, (dataDir) =>
      copyFileSync(file, join(dataDir, 'parley.db')),
    );
    assertOneLineFailure(result, /^parley: .*9999_from_a_newer_version.*newer/);
    assert.doesNotMatch(result.stderr, /corrupted|check DATA_DIR/);
  });
});
