/**
 * SQLite checkpoints in a worker thread (src/store/wal-checkpoints.ts, docs/decisions/0057-background-checkpoints.md):
 * the thread starts once the log holds enough pages (docs/decisions/0066-checkpoint-thread-on-demand.md), the
 * service's connection then leaves the checkpoints to it (its own threshold a safety net of 50,000 pages), the
 * thread copies the log and the log starts over, the log's file keeps its size while the store writes and is emptied
 * once it is idle (docs/decisions/0070-wal-kept-while-busy.md), a thread that cannot work gives the checkpoints back
 * to the connection, and a process killed with SIGKILL while the thread copies keeps every committed row in a sound
 * file.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { openStore, WAL_SIZE_LIMIT_BYTES } from '../../src/store/database.ts';
import {
  type CheckpointReport,
  SAFETY_CHECKPOINT_PAGES,
  START_PAGES,
  WalCheckpoints,
  walPages,
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
      const threshold = async () =>
        (await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(store.db)).rows;
      assert.deepEqual(
        await threshold(),
        [{ wal_autocheckpoint: 1000 }],
        "SQLite's own until the thread starts",
      );
      // A log that starts over is cut back only above the largest log the safety threshold lets grow.
      assert.deepEqual(
        (await sql<{ journal_size_limit: number }>`pragma journal_size_limit`.execute(store.db)).rows,
        [{ journal_size_limit: WAL_SIZE_LIMIT_BYTES }],
      );
      assert.ok(WAL_SIZE_LIMIT_BYTES > 32 + SAFETY_CHECKPOINT_PAGES * (24 + 4096));
      await sql`create table rows (id integer primary key, body text not null)`.execute(store.db);
      // The thread starts once the log holds START_PAGES pages.
      for (let id = 1; id <= START_PAGES; id++) {
        await sql`insert into rows (id, body) values (${id}, ${'x'.repeat(4000)})`.execute(store.db);
      }
      await until(async () => reports.length > 0, 10_000, "the thread's first checkpoint");
      // About 2,400 pages of log, past the thread's 1,000-page threshold.
      for (let id = START_PAGES + 1; id <= 2_000; id++) {
        await sql`insert into rows (id, body) values (${id}, ${'x'.repeat(4000)})`.execute(store.db);
      }
      await until(
        async () => reports.some((report) => report.log > 1_000 && report.checkpointed === report.log),
        10_000,
        'a checkpoint that copied the whole log',
      );
      assert.deepEqual(
        await threshold(),
        [{ wal_autocheckpoint: SAFETY_CHECKPOINT_PAGES }],
        'the service connection leaves them to the thread',
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

  /**
   * A SQLite file in WAL mode with the service's log limit, a burst of 500 pages written before the thread starts
   * (the thread's first look runs on a timer, after the synchronous burst), and its checkpoints with an idle time of
   * 1 s. → the connection, the insert, the reports, the log file's size and the checkpoints.
   */
  function idleStore(name: string) {
    const path = join(dir, name);
    const sqlite = new SQLite(path);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    const reports: CheckpointReport[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, path, {
      intervalMs: 10,
      startPages: 1,
      idleTruncateMs: IDLE_MS,
      onReport: (report) => reports.push(report),
    });
    sqlite.exec('create table rows (id integer primary key, body text not null)');
    const insert = sqlite.prepare('insert into rows (body) values (?)');
    for (let row = 0; row < 500; row++) insert.run('w'.repeat(4000));
    const logBytes = () => statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
    return { sqlite, insert, reports, logBytes, checkpoints };
  }
  const IDLE_MS = 1_000;
  const emptied = (reports: CheckpointReport[]) => reports.filter((report) => report.truncated).length;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('the log keeps its size while the store writes, and the thread empties its file once the store is idle', async () => {
    const { sqlite, insert, reports, logBytes, checkpoints } = idleStore('idle.db');
    try {
      const burst = logBytes();
      assert.ok(burst > 500 * 4096, `the burst's log: ${burst} bytes`);
      await until(async () => reports.length > 0, 10_000, "the thread's first checkpoint");
      // Writes every 20 ms for twice the idle time: the store is never idle, the file is never emptied, and once
      // the log starts over the next writes go over the file's pages instead of growing it.
      const writing = performance.now();
      while (performance.now() - writing < 2 * IDLE_MS) {
        insert.run('s');
        await sleep(20);
      }
      assert.equal(emptied(reports), 0, 'no emptying while the store writes');
      assert.ok(logBytes() >= burst, `the file kept the burst's size: ${logBytes()} of ${burst} bytes`);
      await until(async () => emptied(reports) === 1, 10_000, 'the idle log emptied');
      assert.equal(logBytes(), 0, 'the file is empty');
      // An empty log is not emptied again, however long the store stays idle.
      await sleep(2.5 * IDLE_MS);
      assert.equal(emptied(reports), 1, 'emptied once');
      // A new commit writes the log anew, and the next quiet spell empties it again.
      insert.run('after');
      assert.ok(logBytes() > 0, 'the commit is in the log');
      await until(async () => emptied(reports) === 2, 10_000, 'the log emptied after the next quiet spell');
      assert.equal(logBytes(), 0);
      const { n } = sqlite.prepare('select count(*) as n from rows').get() as { n: number };
      assert.ok(n > 500, `every row kept: ${n}`);
      assert.deepEqual(
        reports.filter((report) => report.error !== undefined),
        [],
      );
    } finally {
      await checkpoints.stop();
      sqlite.close();
    }
  });

  it('an idle log that a reader still uses is not emptied, and the thread does not wait for the reader', async () => {
    const { sqlite, reports, logBytes, checkpoints } = idleStore('reader.db');
    // A read transaction on another connection, begun before the thread copied anything, reads the burst from the
    // log and keeps its place there (a reader begun after a whole copy reads the database file alone, and an
    // emptied log would not concern it): emptying the log must wait for it, and the thread waits for no one.
    const reader = new SQLite(join(dir, 'reader.db'));
    reader.exec('begin');
    reader.prepare('select count(*) from rows').get();
    try {
      await until(
        async () => reports.some((report) => report.log > 0 && report.checkpointed === report.log),
        10_000,
        'the burst wholly copied',
      );
      const before = reports.length;
      await sleep(2.5 * IDLE_MS);
      assert.equal(emptied(reports), 0, 'not emptied under the reader');
      assert.ok(
        reports.some((report) => report.busy === 1),
        'the emptying reported busy',
      );
      assert.ok(
        reports.length - before > 50,
        `the thread kept checkpointing: ${reports.length - before} runs`,
      );
      assert.ok(logBytes() > 0);
      reader.exec('commit');
      await until(async () => emptied(reports) === 1, 10_000, 'the log emptied once the reader left');
      assert.equal(logBytes(), 0);
    } finally {
      reader.close();
      await checkpoints.stop();
      sqlite.close();
    }
  });

  it("the thread starts only once the log holds enough pages; until then the connection keeps SQLite's threshold", async () => {
    const path = join(dir, 'on-demand.db');
    const sqlite = new SQLite(path);
    sqlite.pragma('journal_mode = WAL');
    const looks: number[] = [];
    const reports: CheckpointReport[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, path, {
      intervalMs: 10,
      onLook: (pages) => looks.push(pages),
      onReport: (report) => reports.push(report),
    });
    try {
      sqlite.exec('create table rows (id integer primary key, body text not null)');
      const insert = sqlite.prepare('insert into rows (body) values (?)');
      for (let row = 0; row < 10; row++) insert.run('x'.repeat(100));
      const seen = looks.length;
      await until(async () => looks.length >= seen + 3, 10_000, 'three looks at the log after the writes');
      const small = looks.at(-1) ?? 0;
      assert.ok(small > 0 && small < START_PAGES, `a log of a few pages: ${small}`);
      assert.equal(checkpoints.started, false, 'no thread for a log that small');
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000);
      assert.equal(reports.length, 0, 'no checkpoint ran');

      for (let row = 0; row < START_PAGES; row++) insert.run('y'.repeat(4000));
      await until(async () => reports.length > 0, 10_000, "the thread's first checkpoint");
      assert.equal(checkpoints.started, true);
      assert.ok((looks.at(-1) ?? 0) >= START_PAGES, `started at ${looks.at(-1)} pages`);
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), SAFETY_CHECKPOINT_PAGES);
      assert.deepEqual(
        reports.filter((report) => report.error !== undefined),
        [],
      );
    } finally {
      await checkpoints.stop();
      sqlite.close();
    }
    assert.equal(checkpoints.started, true);
  });

  it('a file opened through a symbolic link: the log is looked for beside the file SQLite opened', async () => {
    mkdirSync(join(dir, 'real'));
    mkdirSync(join(dir, 'link'));
    new SQLite(join(dir, 'real', 'linked.db')).close();
    symlinkSync(join(dir, 'real', 'linked.db'), join(dir, 'link', 'linked.db'));
    const path = join(dir, 'link', 'linked.db');
    const sqlite = new SQLite(path);
    sqlite.pragma('journal_mode = WAL');
    const reports: CheckpointReport[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, path, {
      intervalMs: 10,
      onReport: (report) => reports.push(report),
    });
    try {
      sqlite.exec('create table rows (id integer primary key, body text not null)');
      const insert = sqlite.prepare('insert into rows (body) values (?)');
      for (let row = 0; row < START_PAGES; row++) insert.run('l'.repeat(4000));
      await until(async () => reports.length > 0, 10_000, "the thread's first checkpoint");
      assert.equal(checkpoints.started, true);
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), SAFETY_CHECKPOINT_PAGES);
    } finally {
      await checkpoints.stop();
      sqlite.close();
    }
  });

  it('a thread the look cannot start is reported, never thrown, and the connection keeps its threshold', async () => {
    const path = join(dir, 'busy.db');
    const sqlite = new SQLite(path);
    sqlite.pragma('journal_mode = WAL');
    sqlite.exec('create table rows (id integer primary key, body text not null)');
    sqlite.prepare('insert into rows (body) values (?)').run('first');
    const failures: Error[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, path, {
      intervalMs: 10,
      onFailure: (error) => failures.push(error),
    });
    // An open iterator keeps the connection busy: the pragma that hands the checkpoints over then fails.
    const rows = sqlite.prepare('select id from rows').iterate();
    rows.next();
    const writer = new SQLite(path);
    try {
      const insert = writer.prepare('insert into rows (body) values (?)');
      for (let row = 0; row < START_PAGES; row++) insert.run('b'.repeat(4000));
      await until(async () => failures.length === 1, 10_000, 'the failure to be reported');
      assert.match(String(failures[0]?.message), /busy/i);
      rows.return?.();
      assert.equal(checkpoints.started, false);
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000, "SQLite's own threshold");
    } finally {
      rows.return?.();
      writer.close();
      await checkpoints.stop();
      sqlite.close();
    }
  });

  it("the log's pages read from its size are the frames SQLite counts", () => {
    assert.equal(walPages(0, 4096), 0);
    assert.equal(walPages(32, 4096), 0);
    assert.equal(walPages(32 + 3 * (24 + 4096), 4096), 3);
    assert.equal(walPages(32 + 3 * (24 + 4096) + 100, 4096), 3, 'a frame being written is not counted');
    const path = join(dir, 'frames.db');
    const sqlite = new SQLite(path);
    try {
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma('wal_autocheckpoint = 0');
      sqlite.exec('create table rows (id integer primary key, body text not null)');
      const insert = sqlite.prepare('insert into rows (body) values (?)');
      for (let row = 0; row < 25; row++) insert.run('z'.repeat(3000));
      const pageSize = Number(sqlite.pragma('page_size', { simple: true }));
      const [counted] = sqlite.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
      assert.ok((counted?.log ?? 0) > 25, JSON.stringify(counted));
      assert.equal(walPages(statSync(`${path}-wal`).size, pageSize), counted?.log);
    } finally {
      sqlite.close();
    }
  });

  it('a thread that cannot open the file gives the checkpoints back to the connection and says why', async () => {
    const sqlite = new SQLite(join(dir, 'fallback.db'));
    sqlite.pragma('journal_mode = WAL');
    const failures: Error[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, join(dir, 'no-such-dir', 'x.db'), {
      startPages: 0,
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

  it('a thread that fails while the connection is busy leaves it the safety net, and nothing is thrown', async () => {
    const sqlite = new SQLite(join(dir, 'busy-fallback.db'));
    sqlite.pragma('journal_mode = WAL');
    sqlite.exec('create table rows (id integer primary key)');
    sqlite.prepare('insert into rows (id) values (1)').run();
    const failures: Error[] = [];
    const checkpoints = WalCheckpoints.start(sqlite, join(dir, 'no-such-dir', 'y.db'), {
      startPages: 0,
      onFailure: (error) => failures.push(error),
    });
    const rows = sqlite.prepare('select id from rows').iterate();
    rows.next();
    try {
      await until(async () => failures.length === 1, 10_000, 'the thread to fail');
      rows.return?.();
      assert.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), SAFETY_CHECKPOINT_PAGES);
    } finally {
      rows.return?.();
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
