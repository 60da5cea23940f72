/**
 * SQLite checkpoints in a worker thread (src/store/wal-checkpoints.ts, docs/decisions/0057-background-checkpoints.md):
 * the service's connection leaves them to the thread (its own threshold a safety net of 10,000 pages), the thread copies the log and the log starts
 * over, a thread that cannot work gives the checkpoints back to the connection, and a process killed with SIGKILL
 * while the thread copies keeps every committed row in a sound file.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { openStore } from '../../src/store/database.ts';
import {
  type CheckpointReport,
  SAFETY_CHECKPOINT_PAGES,
  WalCheckpoints,
} from '../../src/store/wal-checkpoints.ts';
import { Output, ROOT } from '../support/parley-process.ts';
import { until } from '../webhooks/child.ts';

describe('SQLite checkpoints in a worker thread', () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-checkpoints-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the thread copies the log while the connection leaves it the checkpoints, and the log starts over', async () => {
    const reports: CheckpointReport[] = [];
    const store = await openStore(
      { dialect: 'sqlite', path: join(dir, 'copy.db') },
      { onCheckpoint: (report) => reports.push(report) },
    );
    try {
      const setting = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(store.db);
      assert.deepEqual(
        setting.rows,
        [{ wal_autocheckpoint: SAFETY_CHECKPOINT_PAGES }],
        'the service connection leaves them to the thread',
      );
      await sql`create table rows (id integer primary key, body text not null)`.execute(store.db);
      // About 2,500 pages of log, past the thread's 1,000-page threshold.
      for (let id = 1; id <= 2_000; id++) {
        await sql`insert into rows (id, body) values (${id}, ${'x'.repeat(4000)})`.execute(store.db);
      }
      await until(
        async () => reports.some((report) => report.log > 1_000 && report.checkpointed === report.log),
        10_000,
        'a checkpoint that copied the whole log',
      );
      // A later commit starts the log over (one that begins while no checkpoint is copying): the thread's figures
      // then count only the pages written since.
      let id = 2_000;
      await until(
        async () => {
          id += 1;
          await sql`insert into rows (id, body) values (${id}, ${'y'})`.execute(store.db);
          const last = reports.at(-1);
          return last !== undefined && last.log < 100 && last.checkpointed === last.log;
        },
        10_000,
        `the log to start over (last figures ${JSON.stringify(reports.at(-1))})`,
      );
      assert.deepEqual(
        reports.filter((report) => report.error !== undefined),
        [],
      );
      const count = await sql<{ n: number }>`select count(*) as n from rows`.execute(store.db);
      assert.deepEqual(count.rows, [{ n: id }]);
    } finally {
      await store.destroy();
    }
  });

  it('a thread that cannot open the file gives the checkpoints back to the connection and says why', async () => {
    const sqlite = new SQLite(join(dir, 'fallback.db'));
    sqlite.pragma('journal_mode = WAL');
    const failures: Error[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, join(dir, 'no-such-dir', 'x.db'), {
      onFailure: (error) => failures.push(error),
    });
    try {
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), SAFETY_CHECKPOINT_PAGES);
      await until(async () => failures.length === 1, 10_000, 'the thread to fail');
      assert.match(String(failures[0]?.message), /unable to open|directory does not exist|cannot open/i);
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000, 'checkpoints inline again');
    } finally {
      await checkpoints.stop();
      sqlite.close();
    }
  });

  it('a process killed with SIGKILL while the thread copies keeps every committed row in a sound file', async () => {
    const path = join(dir, 'killed.db');
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/store/wal-writer.ts', path], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const output = new Output(child);
    try {
      // Killed after several checkpoints copied pages, with commits running.
      await until(
        async () => (output.text.match(/^checkpoint \d+$/gm) ?? []).length >= 3 || child.exitCode !== null,
        60_000,
        'three checkpoints',
      );
      assert.equal(child.exitCode, null, `the writer is still running: ${output.text.slice(-500)}`);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const committed = [...output.text.matchAll(/committed (\d+)/g)].map((match) => Number(match[1]));
    const last = committed.at(-1);
    assert.ok(last !== undefined && last > 0, output.text.slice(-500));
    const reopened = new SQLite(path);
    try {
      assert.equal(reopened.pragma('integrity_check', { simple: true }), 'ok');
      const row = reopened.prepare('select count(*) as n, max(id) as top from rows').get() as {
        n: number;
        top: number;
      };
      assert.ok(row.top >= last, `every committed row is there: ${row.top} ≥ ${last}`);
      assert.equal(row.n, row.top, 'no gap: each transaction whole or absent');
      assert.equal(row.n % 20, 0, 'whole transactions only');
    } finally {
      reopened.close();
    }
  });
});
