/**
 * SQLite's temporary storage in memory (src/store/database.ts, docs/decisions/0069-sqlite-temp-store-in-memory.md):
 * the service connection keeps its statement journals and transient tables in memory, so a statement that changes
 * many rows inside a transaction (the turn's group inserts and updates) creates no temporary file.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../../src/store/database.ts';

/** The files this process holds open whose name is one of SQLite's temporary files (`etilqs_…`; Linux `/proc`). */
function openTemporaryFiles(): string[] {
  const fds = '/proc/self/fd';
  const targets: string[] = [];
  for (const fd of readdirSync(fds)) {
    try {
      targets.push(readlinkSync(join(fds, fd)));
    } catch {
      // closed between the listing and the read
    }
  }
  return targets.filter((target) => target.includes('etilqs_'));
}

describe('SQLite temporary storage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-temp-store-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps a large statement journal in memory: no temporary file while the transaction is open', async () => {
    const store = await openStore({ dialect: 'sqlite', path: join(dir, 'journal.db') });
    try {
      assert.deepEqual((await sql<{ temp_store: number }>`pragma temp_store`.execute(store.db)).rows, [
        { temp_store: 2 },
      ]);
      // About 250 pages of rows under a unique index: an update of every row may fail midway on the index, so SQLite
      // journals the original of each page it changes for the statement (far over its 64 KiB spill threshold).
      await sql`create table rows (id integer primary key, body text not null unique)`.execute(store.db);
      await sql`
        with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
        insert into rows (id, body) select i, printf('%0400d', i) from n
      `.execute(store.db);
      const during = await store.db.transaction().execute(async (trx) => {
        await sql`update rows set body = body || 'x'`.execute(trx);
        return existsSync('/proc/self/fd') ? openTemporaryFiles() : [];
      });
      assert.deepEqual(during, [], 'no statement journal spilled to a file');
      const { rows } = await sql<{ n: number }>`select count(*) as n from rows where body like '%x'`.execute(
        store.db,
      );
      assert.deepEqual(rows, [{ n: 2000 }]);
    } finally {
      await store.destroy();
    }
  });
});
