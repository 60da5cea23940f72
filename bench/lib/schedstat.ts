import { readFileSync } from 'node:fs';
import { median } from './stats.ts';

/**
 * The scheduler's times of one thread so far, from `/proc/<pid>/task/<tid>/schedstat` (Linux; the kernel's
 * Documentation/scheduler/sched-stats.rst: the time spent on a core and the time spent waiting in a run queue, both
 * nanoseconds, then the timeslices run). Only differences between two reads mean anything.
 */
export interface ThreadTimes {
  /** Nanoseconds the thread ran on a core. */
  onCoreNs: number;
  /** Nanoseconds the thread was ready to run and waited for a core. */
  waitingNs: number;
  /** When this was read (`performance.now()`, milliseconds). */
  atMs: number;
}

/** A thread's shares of an interval's wall time, percent (rounded to whole numbers). */
export interface ThreadShares {
  /** On a core. */
  onCorePercent: number;
  /** Ready to run and waiting for a core: what the other processes on the machine's cores took from it. */
  waitingPercent: number;
}

/**
 * The times of process `pid`'s main thread (its thread id is its pid); undefined where `/proc` does not give them
 * (not Linux, a kernel without scheduler statistics, or the process gone).
 */
export function mainThreadTimes(pid: number): ThreadTimes | undefined {
  try {
    const [onCore, waiting] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(/\s+/);
    const onCoreNs = Number(onCore);
    const waitingNs = Number(waiting);
    if (!Number.isFinite(onCoreNs) || !Number.isFinite(waitingNs)) return undefined;
    return { onCoreNs, waitingNs, atMs: performance.now() };
  } catch {
    return undefined;
  }
}

/**
 * The shares of the wall time between `before` and `after` (two reads of one thread) that it spent on a core and
 * waiting for one; undefined when either read is missing or no time passed.
 */
export function sharesBetween(
  before: ThreadTimes | undefined,
  after: ThreadTimes | undefined,
): ThreadShares | undefined {
  if (before === undefined || after === undefined) return undefined;
  const wallNs = (after.atMs - before.atMs) * 1e6;
  if (wallNs <= 0) return undefined;
  const percent = (ns: number) => Math.round((ns / wallNs) * 100);
  return {
    onCorePercent: percent(after.onCoreNs - before.onCoreNs),
    waitingPercent: percent(after.waitingNs - before.waitingNs),
  };
}

/** `shares` as the benchmark's rows print them: "on a core 65 %, waiting for one 18 %". */
export function describeShares(shares: ThreadShares): string {
  return `on a core ${shares.onCorePercent} %, waiting for one ${shares.waitingPercent} %`;
}

/**
 * Several runs' shares as one: each share the median of theirs (rounded to whole numbers), as the rows take the
 * runs' other figures; undefined when none was measured.
 */
export function medianShares(runs: readonly (ThreadShares | undefined)[]): ThreadShares | undefined {
  const measured = runs.filter((shares): shares is ThreadShares => shares !== undefined);
  if (measured.length === 0) return undefined;
  return {
    onCorePercent: Math.round(median(measured.map((shares) => shares.onCorePercent))),
    waitingPercent: Math.round(median(measured.map((shares) => shares.waitingPercent))),
  };
}
