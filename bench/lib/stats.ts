/** Small statistics and formatting helpers for the benchmark report. */

import { loadavg } from 'node:os';

/** Percentiles of a set of samples (ms), nearest-rank method. */
export interface Percentiles {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * Nearest-rank percentiles of `samples` (any unit; the benchmarks use milliseconds). Empty input gives zeros.
 * Sorts a copy; `samples` is not changed.
 */
export function percentiles(samples: ArrayLike<number>): Percentiles {
  const sorted = Float64Array.from(samples).sort();
  const count = sorted.length;
  if (count === 0) return { count: 0, p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  const rank = (p: number) => sorted[Math.min(count - 1, Math.max(0, Math.ceil((p / 100) * count) - 1))] ?? 0;
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count,
    p50: rank(50),
    p90: rank(90),
    p99: rank(99),
    max: sorted[count - 1] ?? 0,
    mean: sum / count,
  };
}

/** Rounds to `digits` decimals (for the JSON report and the table). */
export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Formats a number with thousands separators and at most `digits` decimals. */
export function fmt(value: number, digits = 1): string {
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

/** Renders rows as a plain-text table with a header rule; every row has the header's column count. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** Sleeps `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The machine's 1-minute load average, rounded to 2 decimals (0 where the platform has none). */
export function load1(): number {
  return round(loadavg()[0] ?? 0, 2);
}

/**
 * CPU time this process used so far (user and system, every thread: the SQLite checkpoint thread included), µs.
 * A role's `cpu` command: the difference over a phase is what the phase cost that process, whatever else the
 * machine ran meanwhile.
 */
export async function cpuMicros(): Promise<number> {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/**
 * The median of `values` (any unit): the middle value, or the mean of the two middle ones for an even count; 0 for
 * none. Sorts a copy. The baselines of the send and delivery scenarios are the median of their runs before and
 * after parley's (docs/benchmarks.md, "Method": bracketed baselines).
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const count = sorted.length;
  if (count === 0) return 0;
  const upper = sorted[Math.floor(count / 2)] ?? 0;
  return count % 2 === 1 ? upper : ((sorted[count / 2 - 1] ?? 0) + upper) / 2;
}
