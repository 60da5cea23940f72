import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { storeFailure } from '../../src/store/database.ts';
import { Output, ROOT } from '../support/parley-process.ts';
import { cliInProcess, holdWriteLock } from './support.ts';

/**
 * SQLite: another process holding the file's write lock (an operator's sqlite3 session, another version migrating)
 * for longer than busy_timeout neither fails a command that has nothing to migrate (no write lock is taken) nor a
 * migration (it waits, saying so) (docs/deploy.md "Upgrading", docs/decisions/0011-store-faults.md).
 */

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

describe('SQLite: another process holds the write lock (docs/deploy.md "Upgrading")', () => {
  it('a command with nothing to migrate does not wait for it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-lock-read-'));
    try {
      const env = { DATA_DIR: dataDir };
      assert.equal((await cliInProcess(env, '--init', 'org', 'create', '--name', 'acme')).code, 0);
      const holder = await holdWriteLock(join(dataDir, 'parley.db'), 'update organizations set plan = plan');
      try {
        const listed = await cliInProcess(env, 'org', 'list', '--json');
        assert.equal(listed.code, 0, listed.err.join('\n'));
        assert.deepEqual(
          JSON.parse(listed.out[0] ?? '{}').organizations.map((org: { name: string }) => org.name),
          ['acme'],
        );
        assert.deepEqual(listed.err, []);
      } finally {
        await holder.release();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a migration waits for it, saying so, and applies once it is free', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-lock-migrate-'));
    try {
      // A file without parley's tables yet, whose write lock another process holds.
      const holder = await holdWriteLock(join(dataDir, 'parley.db'), 'create table other (id integer)');
      const command = spawn(
        process.execPath,
        ['bin/parley.js', '--init', 'org', 'create', '--name', 'acme', '--json'],
        {
          cwd: ROOT,
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '',
            LOG_LEVEL: 'silent',
            DATA_DIR: dataDir,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const exited = exitOf(command);
      const output = new Output(command);
      try {
        await output.waitFor(
          /parley: another process holds the store's write lock \(a migration\?\): waiting for it to finish/,
          'the wait said',
          exited,
        );
      } finally {
        await holder.release();
      }
      assert.equal(await exited, 0, output.text);
      assert.match(output.text, /"name":"acme"/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a lock that still stops the store is named as such, not as a setting to change', () => {
    const error = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    assert.equal(
      storeFailure({ dialect: 'sqlite', path: '/srv/parley/parley.db' }, error),
      "SQLite file /srv/parley/parley.db is locked by another process (SQLITE_BUSY): another process holds the store's write lock; end it (a sqlite3 session, a running parley command) or wait for it, then try again",
    );
  });
});
