/**
 * Helpers shared by the live benchmark roles (bench/roles/live-parley.ts, bench/roles/live-baseline.ts): memory
 * after forced garbage collection, bounded-concurrency loops, condition waits and the simulator's control API.
 */
import { sleep } from './stats.ts';

/** Resident set size and V8 heap of this process, bytes. */
export interface MemorySample {
  rss: number;
  heapUsed: number;
  /** V8 heap reserved (used or not). */
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

/**
 * This process's memory after `settleMs` of idling and four full garbage collections before and after it.
 * @throws Error when the process was not started with `--expose-gc`.
 */
export async function settledMemory(settleMs: number): Promise<MemorySample> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run the measuring process with --expose-gc');
  for (let i = 0; i < 4; i++) gc();
  await sleep(settleMs);
  for (let i = 0; i < 4; i++) gc();
  const { rss, heapUsed, heapTotal, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapUsed, heapTotal, external, arrayBuffers };
}

/** Runs `work(i)` for i in [0, count) with at most `concurrency` in flight; rejects with the first failure. */
export async function eachLimited(
  count: number,
  concurrency: number,
  work: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/** Re-checks `check` every `everyMs` until it returns true; throws naming `what` after `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * POSTs JSON to the simulator's control API (`control` is its base URL, e.g. `http://127.0.0.1:PORT/control`).
 * @throws Error with the status and body when the answer is not 2xx.
 */
export async function controlPost(control: string, path: string, body: unknown): Promise<unknown> {
  const response = await fetch(`${control}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`simulator ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as unknown;
}

/** What both live roles are given to log in: the simulator and the accounts that scan. */
export interface LiveTarget {
  /** WebSocket URL of the simulator. */
  simUrl: string;
  /** Control API base URL. */
  control: string;
  /** The simulator's root public key, hex. */
  rootKey: string;
  /** Accounts (phones defined on the simulator), one session each. */
  phones: string[];
  /** Logins in flight at once. */
  concurrency: number;
  /** Webhook URL (the benchmark receiver) and HMAC key. */
  webhookUrl: string;
  hmacKey: string;
}

/** Timings of a reconnection wave, ms from when the runner asked. */
export interface ReconnectTiming {
  /** Until every session was back (connected and logged in). */
  allBackMs: number;
  /** Each session's time back, sorted ascending. */
  backMs: number[];
}
