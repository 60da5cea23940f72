import { statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';

/** What {@link WalCheckpoints} gives its worker thread (src/store/wal-checkpoint-worker.ts). */
export interface CheckpointWorkerData {
  /** The SQLite file. */
  path: string;
  /** Longest wait between two checkpoints, ms. */
  intervalMs: number;
  /** Pages of the log not yet copied past which the next checkpoint runs at once. */
  pages: number;
  /** How long the log must stay wholly copied with no commit before the thread empties its file, ms. */
  idleTruncateMs: number;
}

/**
 * One checkpoint's figures, as `PRAGMA wal_checkpoint` returns them: `busy` 1 when it could not finish, `log` the
 * pages in the write-ahead log, `checkpointed` those now copied into the database file; -1 and `error` when it
 * failed. `truncated` is true when this run emptied the log's file after the store was idle
 * ({@link IDLE_TRUNCATE_MS}; the figures are then the truncating checkpoint's, 0 and 0).
 */
export interface CheckpointReport {
  busy: number;
  log: number;
  checkpointed: number;
  error?: string;
  truncated?: true;
}

/** Longest wait between two background checkpoints, ms. */
export const CHECKPOINT_INTERVAL_MS = 100;

/**
 * Log pages not yet copied past which the next checkpoint runs at once: SQLite's own automatic threshold, which the
 * service's connection gets back when the thread is gone.
 */
export const CHECKPOINT_PAGES = 1000;

/**
 * Pages the log must first hold before the thread starts (docs/decisions/0066-checkpoint-thread-on-demand.md): about
 * 400 KiB. Until then the service's connection keeps SQLite's own threshold ({@link CHECKPOINT_PAGES}), which such a
 * log is far from.
 */
export const START_PAGES = 100;

/**
 * The service connection's own threshold while the thread runs, in pages (about 200 MiB of 4 KiB pages;
 * docs/decisions/0057-background-checkpoints.md). Under writes that never pause, the thread's passive checkpoints
 * copy the log but never catch up with its end, so the log cannot start over and grows until this threshold: the
 * connection's own checkpoint then copies the rest and syncs, holding the event loop for 8–27 ms (measured in
 * docs/benchmarks.md, step 68). At 10,000 pages that came every 0.4 s of a send run and made its p99; at 50,000
 * every 2 s. It also bounds the log if the thread ever stops keeping up.
 */
export const SAFETY_CHECKPOINT_PAGES = 50_000;

/**
 * How long the log must stay wholly copied with no commit before the thread empties its file, ms: 60 s
 * (docs/decisions/0070-wal-kept-while-busy.md). While the service writes, the log's file keeps the size a burst gave
 * it, so the next burst writes over pages the system already holds instead of growing the file again; once the store
 * has been quiet this long the thread gives the space back (`PRAGMA wal_checkpoint(TRUNCATE)`).
 */
export const IDLE_TRUNCATE_MS = 60_000;

/** Options of {@link WalCheckpoints.start}. */
export interface WalCheckpointOptions {
  /** Longest wait between two checkpoints, ms (default {@link CHECKPOINT_INTERVAL_MS}). */
  intervalMs?: number;
  /** Log pages not yet copied past which the next checkpoint runs at once (default {@link CHECKPOINT_PAGES}). */
  pages?: number;
  /**
   * How long the log must stay wholly copied with no commit before the thread empties its file, ms (default
   * {@link IDLE_TRUNCATE_MS}).
   */
  idleTruncateMs?: number;
  /**
   * Pages the log must first hold before the thread starts, looked at every `intervalMs` (default
   * {@link START_PAGES}; 0 starts it at once).
   */
  startPages?: number;
  /** Told the log's pages at each look before the thread starts (tests). */
  onLook?: (pages: number) => void;
  /** Told when the worker thread failed or ended by itself (checkpoints then run inline again). */
  onFailure?: (error: Error) => void;
  /** Told every checkpoint's figures (tests). */
  onReport?: (report: CheckpointReport) => void;
}

/** The worker's module: the compiled `.js` beside this file in dist/, the `.ts` source under tsx. */
const WORKER = new URL(
  import.meta.url.endsWith('.ts') ? './wal-checkpoint-worker.ts' : './wal-checkpoint-worker.js',
  import.meta.url,
);

/**
 * The worker thread running src/store/wal-checkpoint-worker.ts. From the compiled `.js` (dist/, production) it is
 * started as it is; from the `.ts` sources (tests, benchmarks, under tsx) the thread first registers tsx's loader,
 * which Node 20 does not carry from `--import` into worker threads.
 */
function startWorker(data: CheckpointWorkerData): Worker {
  if (!WORKER.pathname.endsWith('.ts')) return new Worker(WORKER, { workerData: data });
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(WORKER.href)}); });`;
  return new Worker(code, { eval: true, workerData: data });
}

/**
 * The pages a write-ahead log file of `bytes` holds: a 32-byte header, then frames of a 24-byte header and one page
 * of `pageSize` bytes each (SQLite documentation, "Database File Format", section "WAL File Format").
 */
export function walPages(bytes: number, pageSize: number): number {
  return bytes <= 32 ? 0 : Math.floor((bytes - 32) / (24 + pageSize));
}

/**
 * Checkpoints of a SQLite store in WAL mode run in a worker thread, off the event loop
 * (docs/decisions/0057-background-checkpoints.md). SQLite copies the write-ahead log into the database file when a
 * commit leaves the log past 1,000 pages, inside that commit, and syncs both files as it does: on the service's one
 * connection that stalled every request of the moment. Here a worker thread with its own connection runs passive
 * checkpoints, which wait for nobody, at most every {@link CHECKPOINT_INTERVAL_MS} and at once while more than
 * {@link CHECKPOINT_PAGES} pages are not yet copied; the service's connection checkpoints only past
 * {@link SAFETY_CHECKPOINT_PAGES}, which under writes that never pause is where the log starts over. Durability is
 * unchanged: a commit is in the log before it is answered, and the log is replayed after a crash whether or not it
 * was copied.
 *
 * The log's file keeps the size a burst gave it while the store is busy, and the thread empties it once the log has
 * stayed wholly copied for {@link IDLE_TRUNCATE_MS} (docs/decisions/0070-wal-kept-while-busy.md).
 *
 * The thread starts once the log first holds {@link START_PAGES} pages (the `-wal` file's size, looked at every
 * interval; docs/decisions/0066-checkpoint-thread-on-demand.md): a store that writes little (a CLI command, a quiet
 * service) never pays for a thread, and until it starts the connection keeps SQLite's own threshold.
 *
 * When the worker cannot start or ends by itself, the service's connection checkpoints inline again
 * (`wal_autocheckpoint = 1000`), and `onFailure` is told.
 */
export class WalCheckpoints {
  readonly #sqlite: SQLite.Database;
  readonly #data: CheckpointWorkerData;
  readonly #options: WalCheckpointOptions;
  #worker: Worker | undefined;
  #look: NodeJS.Timeout | undefined;
  #stopping = false;
  #exited: Promise<void> = Promise.resolve();

  private constructor(sqlite: SQLite.Database, path: string, options: WalCheckpointOptions) {
    this.#sqlite = sqlite;
    this.#options = options;
    this.#data = {
      path,
      intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS,
      pages: options.pages ?? CHECKPOINT_PAGES,
      idleTruncateMs: options.idleTruncateMs ?? IDLE_TRUNCATE_MS,
    };
    const startPages = options.startPages ?? START_PAGES;
    if (startPages <= 0) {
      this.#start();
      return;
    }
    const pageSize = Number(sqlite.pragma('page_size', { simple: true }));
    // The log sits beside the file SQLite opened, which it found by following any symbolic link in `path`.
    const opened = (sqlite.pragma('database_list') as { name: string; file: string }[]).find(
      (database) => database.name === 'main',
    );
    const log = `${opened?.file || path}-wal`;
    this.#look = setInterval(() => {
      let bytes: number;
      try {
        bytes = statSync(log, { throwIfNoEntry: false })?.size ?? 0;
      } catch {
        // Looked at again next time; meanwhile the connection's own threshold bounds the log.
        return;
      }
      const pages = walPages(bytes, pageSize);
      options.onLook?.(pages);
      if (pages >= startPages) this.#start();
    }, this.#data.intervalMs);
    // The look never keeps the process alive.
    this.#look.unref();
  }

  /**
   * Starts background checkpoints for the open connection `sqlite` of the file `path` (WAL mode): the thread now
   * with `startPages` 0, else once the log holds that many pages.
   * @returns the checkpoints; stop them with {@link stop} before closing `sqlite`.
   */
  static start(sqlite: SQLite.Database, path: string, options: WalCheckpointOptions = {}): WalCheckpoints {
    return new WalCheckpoints(sqlite, path, options);
  }

  /** True once the thread was started (it may have ended since). */
  get started(): boolean {
    return this.#worker !== undefined;
  }

  /**
   * Stops the worker (its connection closed) and gives the checkpoints back to `sqlite`, so that closing it copies
   * the log as SQLite does for its last connection. Waits at most `waitMs` (default 2,000) for the thread to end.
   */
  async stop(waitMs = 2_000): Promise<void> {
    if (this.#stopping) return this.#exited;
    this.#stopping = true;
    clearInterval(this.#look);
    const worker = this.#worker;
    if (worker === undefined) return;
    worker.postMessage('stop');
    const timer = setTimeout(() => void worker.terminate(), waitMs);
    await this.#exited;
    clearTimeout(timer);
    this.#inline();
  }

  /** Starts the thread and leaves the checkpoints to it (the connection's own threshold a safety net). */
  #start(): void {
    clearInterval(this.#look);
    this.#look = undefined;
    if (this.#worker !== undefined || this.#stopping || !this.#sqlite.open) return;
    let worker: Worker | undefined;
    try {
      worker = startWorker(this.#data);
      this.#sqlite.pragma(`wal_autocheckpoint = ${SAFETY_CHECKPOINT_PAGES}`);
    } catch (error) {
      // Never thrown out of the look's timer: the connection keeps SQLite's own threshold, which the failed pragma
      // or the thread that never started left in place.
      void worker?.terminate();
      this.#options.onFailure?.(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.#worker = worker;
    // The thread never keeps the process alive: a checkpoint cut short by the exit is safe (the log stays whole).
    worker.unref();
    let failure: Error | undefined;
    worker.on('error', (error: Error) => {
      failure = error;
    });
    worker.on('message', (report: CheckpointReport) => this.#options.onReport?.(report));
    this.#exited = new Promise<void>((resolve) => {
      worker.once('exit', (code) => {
        if (!this.#stopping) {
          this.#inline();
          this.#options.onFailure?.(failure ?? new Error(`the checkpoint thread ended with code ${code}`));
        }
        resolve();
      });
    });
  }

  /**
   * Puts the checkpoints back on the service's connection, if it is still open. Never throws (it runs in the
   * worker's exit event): a connection busy at that instant keeps its safety net of {@link SAFETY_CHECKPOINT_PAGES}.
   */
  #inline(): void {
    try {
      if (this.#sqlite.open) this.#sqlite.pragma(`wal_autocheckpoint = ${CHECKPOINT_PAGES}`);
    } catch {
      // The safety net still bounds the log.
    }
  }
}
