import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { extended } from '../domain/objects.ts';
import type { CheckpointReport, CheckpointWorkerData } from './wal-checkpoints.ts';

/**
 * The worker thread of {@link WalCheckpoints} (src/store/wal-checkpoints.ts, docs/decisions/0057-background-checkpoints.md):
 * its own connection to the SQLite file runs `PRAGMA wal_checkpoint(PASSIVE)`, which copies the write-ahead log's
 * committed pages into the database file (and syncs both, as `synchronous = NORMAL` asks at a checkpoint) without
 * waiting for the service's connection, which keeps reading and writing meanwhile (SQLite documentation,
 * "Write-Ahead Logging", section "Checkpointing", and `sqlite3_wal_checkpoint_v2`). At most every `intervalMs`, and
 * again at once while the log still holds more than `pages` pages not yet copied. Once the log has stayed wholly
 * copied, with no commit, for `idleTruncateMs`, one `PRAGMA wal_checkpoint(TRUNCATE)` empties its file
 * (docs/decisions/0070-wal-kept-while-busy.md); it waits for no writer (a busy store is not idle: it is tried again
 * after the next quiet spell). A `stop` message closes the connection and ends the thread; every run's figures go to
 * the parent as a {@link CheckpointReport}.
 */

const { path, intervalMs, pages, idleTruncateMs } = workerData as CheckpointWorkerData;
const db = new SQLite(path);
db.pragma('synchronous = NORMAL');
// A checkpoint here never starts one of its own on a commit (this connection commits nothing anyway).
db.pragma('wal_autocheckpoint = 0');
// The emptying of an idle log waits for no writer or reader: one at work means the store is not idle after all, and
// the quiet spell starts over (a passive checkpoint never waits anyway).
db.pragma('busy_timeout = 0');

let timer: NodeJS.Timeout | undefined;
let stopping = false;
/**
 * The store's `data_version` at the last run (it moves whenever another connection commits: SQLite documentation,
 * "PRAGMA data_version"; -1 when that run's log was not wholly copied), and since when (`performance.now()`, ms) the
 * log has been wholly copied with no commit.
 */
let lastVersion = -1;
let idleSince = performance.now();

type CheckpointRow = { busy: number; log: number; checkpointed: number };

/** One `PRAGMA wal_checkpoint(<mode>)`'s figures. */
function checkpoint(mode: 'PASSIVE' | 'TRUNCATE'): CheckpointReport {
  const [row] = db.pragma(`wal_checkpoint(${mode})`) as CheckpointRow[];
  return { busy: row?.busy ?? 0, log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 };
}

/**
 * Empties the log's file when the store has been idle for `idleTruncateMs`: the log (of at least one page) wholly
 * copied and no commit since then. A commit that starts the log over may leave it with as many pages as before, so
 * commits are told by the store's `data_version`, not by the log's figures. Returns the truncating checkpoint's
 * figures, or `report` as it was.
 */
function truncateWhenIdle(report: CheckpointReport): CheckpointReport {
  const now = performance.now();
  // The version is read only for a log wholly copied: under writes the thread checkpoints back to back, and a log
  // still being copied is not idle whatever the version says.
  const copied = report.busy === 0 && report.log > 0 && report.checkpointed === report.log;
  const version = copied ? Number(db.pragma('data_version', { simple: true })) : -1;
  const idle = copied && version === lastVersion;
  lastVersion = version;
  if (!idle) {
    idleSince = now;
    return report;
  }
  if (now - idleSince < idleTruncateMs) return report;
  const truncated = checkpoint('TRUNCATE');
  idleSince = now;
  return truncated.busy === 0 ? extended(truncated, { truncated: true }) : truncated;
}

function run(): void {
  timer = undefined;
  if (stopping) return;
  let report: CheckpointReport;
  try {
    report = truncateWhenIdle(checkpoint('PASSIVE'));
  } catch (error) {
    report = {
      busy: 1,
      log: -1,
      checkpointed: -1,
      error: error instanceof Error ? error.message : String(error),
    };
  }
  parentPort?.postMessage(report);
  const behind = report.log - report.checkpointed;
  timer = setTimeout(run, behind > pages ? 0 : intervalMs);
}

parentPort?.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  stopping = true;
  if (timer !== undefined) clearTimeout(timer);
  db.close();
  parentPort?.close();
});

run();
