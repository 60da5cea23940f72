import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import type { CheckpointReport, CheckpointWorkerData } from './wal-checkpoints.ts';

/**
 * The worker thread of {@link WalCheckpoints} (src/store/wal-checkpoints.ts, docs/decisions/0057-background-checkpoints.md):
 * its own connection to the SQLite file runs `PRAGMA wal_checkpoint(PASSIVE)`, which copies the write-ahead log's
 * committed pages into the database file (and syncs both, as `synchronous = NORMAL` asks at a checkpoint) without
 * waiting for the service's connection, which keeps reading and writing meanwhile (SQLite documentation,
 * "Write-Ahead Logging", section "Checkpointing", and `sqlite3_wal_checkpoint_v2`). At most every `intervalMs`, and
 * again at once while the log still holds more than `pages` pages not yet copied. A `stop` message closes the
 * connection and ends the thread; every run's figures go to the parent as a {@link CheckpointReport}.
 */

const { path, intervalMs, pages } = workerData as CheckpointWorkerData;
const db = new SQLite(path);
db.pragma('synchronous = NORMAL');
// A checkpoint here never starts one of its own on a commit (this connection commits nothing anyway).
db.pragma('wal_autocheckpoint = 0');

let timer: NodeJS.Timeout | undefined;
let stopping = false;

function run(): void {
  timer = undefined;
  if (stopping) return;
  let report: CheckpointReport;
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)') as {
      busy: number;
      log: number;
      checkpointed: number;
    }[];
    report = { busy: row?.busy ?? 0, log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 };
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
