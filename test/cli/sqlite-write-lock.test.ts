import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { openStore } from '../../src/store/database.ts';
import { migrateToLatest } from '../../src/store/migrate.ts';
import { withWriteLock } from '../../src/store/write-lock.ts';
import { Output, ROOT } from '../support/parley-process.ts';
import { cliInProcess, holdWriteLock } from './support.ts';

/**
 * SQLite: a CLI command that writes while another process holds the file's write lock (a busy server, an operator's
 * sqlite3 session) waits for it, saying so after a few seconds, and gives up with one line naming the lock only after
 * `--lock-wait` (docs/cli.md "Beside a running server", docs/decisions/0109-cli-writes-wait-for-the-write-lock.md).
 * Its writes are one transaction: all kept or none.
 */

/** A fresh SQLite store in a folder of its own holding organization `acme`; removed after the suite. */
const folders: string[] = [];
after(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});
async function storeWithAcme(): Promise<{ env: Record<string, string>; path: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-write-lock-'));
  folders.push(dataDir);
  const env = { DATA_DIR: dataDir };
  const created = await cliInProcess(env, '--init', 'org', 'create', '--name', 'acme');
  assert.equal(created.code, 0, created.err.join('\n'));
  return { env, path: join(dataDir, 'parley.db') };
}

/** Rows of `query` read from the SQLite file at `path` by a connection of its own. */
function rows(path: string, query: string, ...params: string[]): unknown[] {
  const db = new SQLite(path, { readonly: true });
  try {
    return db.prepare(query).all(...params);
  } finally {
    db.close();
  }
}

describe('SQLite: a command that writes while another process holds the write lock', () => {
  it('waits for it, says so, and stores its row once the lock is free', async () => {
    const { env, path } = await storeWithAcme();
    const holder = await holdWriteLock(path, 'update organizations set plan = plan');
    const command = spawn(
      process.execPath,
      ['bin/parley.js', 'key', 'create', '--org', 'acme', '--env', 'test', '--name', 'beside', '--json'],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    command.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => command.once('exit', (code) => resolve(code)));
    const output = new Output(command);
    try {
      // Past busy_timeout (5 s), where the command failed with "database is locked" before.
      await output.waitFor(
        /parley: another process holds the store's write lock \(the server writing, a sqlite3 session\?\): waiting up to 60 s for it\n/,
        'the wait said',
        exited,
      );
    } finally {
      await holder.release();
    }
    assert.equal(await exited, 0, output.text);
    assert.equal(output.text.split("another process holds the store's write lock").length, 2, 'said once');
    const created = JSON.parse(stdout) as { id: string; env: string; scopes: string[] };
    assert.equal(created.env, 'test');
    assert.deepEqual(
      rows(
        path,
        'select k.name, o.name as org from api_keys k join organizations o on o.id = k.org_id where k.id = ?',
        created.id,
      ),
      [{ name: 'beside', org: 'acme' }],
    );
  });

  it('gives up after --lock-wait with one line naming the lock, and writes nothing', async () => {
    const { env, path } = await storeWithAcme();
    const holder = await holdWriteLock(path, 'update organizations set plan = plan');
    let json: Awaited<ReturnType<typeof cliInProcess>>;
    let human: Awaited<ReturnType<typeof cliInProcess>>;
    try {
      json = await cliInProcess(env, '--lock-wait', '1', 'org', 'create', '--name', 'late', '--json');
      human = await cliInProcess(
        env,
        '--lock-wait',
        '1',
        'user',
        'create',
        '--org',
        'acme',
        '--email',
        'late@example.com',
        '--role',
        'member',
      );
    } finally {
      await holder.release();
    }
    const message =
      `gave up after 1 s waiting for the write lock of the SQLite file ${path}, which another process holds (the ` +
      'server writing, a sqlite3 session, another parley command): nothing was changed; try again, or wait longer ' +
      'with --lock-wait <seconds>';
    assert.deepEqual(json, { code: 1, out: [JSON.stringify({ error: message })], err: [] });
    assert.deepEqual(human, { code: 1, out: [], err: [`parley: ${message}`] });
    assert.deepEqual(rows(path, 'select name from organizations order by name'), [{ name: 'acme' }]);
    assert.deepEqual(rows(path, "select email from dashboard_users where email = 'late@example.com'"), []);
  });

  it('a --lock-wait that is not a whole number of seconds is refused', async () => {
    const { env } = await storeWithAcme();
    const refused = await cliInProcess(env, '--lock-wait', 'soon', 'org', 'create', '--name', 'x', '--json');
    assert.deepEqual(refused, {
      code: 1,
      out: [JSON.stringify({ error: '--lock-wait must be a positive integer' })],
      err: [],
    });
  });
});

describe('withWriteLock on SQLite: one transaction per command', () => {
  it('a command that fails after writing keeps none of its writes, its own transactions included', async () => {
    const { path } = await storeWithAcme();
    const store = await openStore({ dialect: 'sqlite', path });
    try {
      await migrateToLatest(store);
      const options = { waitMs: 1_000, noticeAfterMs: 500 };
      await assert.rejects(
        withWriteLock(store, options, async (db) => {
          await db.updateTable('organizations').set({ plan: 'pro' }).where('name', '=', 'acme').execute();
          await db.transaction().execute(async (trx) => {
            await sql`insert into organizations (id, name, plan, created_at) values ('o2', 'second', 'free', 1)`.execute(
              trx,
            );
          });
          throw new Error('the command failed');
        }),
        /the command failed/,
      );
      assert.deepEqual(rows(path, 'select name, plan from organizations order by name'), [
        { name: 'acme', plan: 'free' },
      ]);
      // A transaction of the command that fails undoes its own writes only; the command's others are kept.
      await withWriteLock(store, options, async (db) => {
        await db.updateTable('organizations').set({ plan: 'pro' }).where('name', '=', 'acme').execute();
        await db
          .transaction()
          .execute(async (trx) => {
            await sql`insert into organizations (id, name, plan, created_at) values ('o3', 'third', 'free', 1)`.execute(
              trx,
            );
            throw new Error('this step failed');
          })
          .catch(() => undefined);
      });
      assert.deepEqual(rows(path, 'select name, plan from organizations order by name'), [
        { name: 'acme', plan: 'pro' },
      ]);
    } finally {
      await store.destroy();
    }
  });
});
