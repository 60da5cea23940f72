import { cpus, totalmem } from 'node:os';
import { fmt, round, table } from './stats.ts';

/** One target of docs/benchmarks.md ("Targets"), checked against a measured value. */
export interface TargetCheck {
  /** What is checked, e.g. `ratio ≥ 0.4` or `p99 ≤ 20 ms`. */
  label: string;
  met: boolean;
  actual: number;
  limit: number;
  /** `≥` when the value must reach the limit, `≤` when it must stay under it. */
  direction: '>=' | '<=';
  /** How far from the limit, as text, when missed (e.g. `0.12 short (30 %)`); empty when met. */
  miss: string;
}

/** The result of one scenario: the figure, its baseline from the same run, and the targets. */
export interface ScenarioResult {
  id: string;
  title: string;
  /** Unit of `value` and `baseline`, e.g. `req/s`, `events/s`, `KB/instance`. */
  unit: string;
  value: number;
  baseline: number | null;
  /** value / baseline, when there is a baseline. */
  ratio: number | null;
  /** Short text of the other figures shown in the table (latencies, counts). */
  summary: string;
  targets: TargetCheck[];
  /** Every figure measured, for results.json. */
  details: Record<string, unknown>;
}

/** `, window N` for a scenario title when parley ran with `WEBHOOK_LANE_WINDOW` N (`--lane-window`), else `''`. */
export function windowNote(laneWindow: number | undefined): string {
  return laneWindow === undefined ? '' : `, window ${laneWindow}`;
}

/** Checks `actual` against `limit` in `direction`; the miss text gives the distance and its share of the limit. */
export function target(
  label: string,
  actual: number,
  direction: '>=' | '<=',
  limit: number,
  unit = '',
): TargetCheck {
  const met = direction === '>=' ? actual >= limit : actual <= limit;
  const gap = Math.abs(actual - limit);
  const share = limit === 0 ? '' : ` (${fmt((gap / limit) * 100, 0)} % of the target)`;
  const miss = met ? '' : `${direction === '>=' ? 'short by' : 'over by'} ${fmt(gap, 2)}${unit}${share}`;
  return { label, met, actual: round(actual, 3), limit, direction, miss };
}

/** The ratio value / baseline rounded to 3 decimals (0 when the baseline is 0). */
export function ratioOf(value: number, baseline: number): number {
  return baseline === 0 ? 0 : round(value / baseline, 3);
}

/** The machine a run measured (for results.json and docs/benchmarks.md). */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  node: string;
  platform: string;
}

/** This machine: CPU model, logical cores, memory, Node version. */
export function machineInfo(): MachineInfo {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

/** A figure of the table: three decimals below 1 (ratios such as scenario 5's), else one. */
function figure(value: number): string {
  return fmt(value, Math.abs(value) < 1 ? 3 : 1);
}

/** The results table printed at the end of a run: one row per scenario, targets with ✓/✗. */
export function resultsTable(results: ScenarioResult[]): string {
  const rows = results.map((r) => [
    r.title,
    `${figure(r.value)} ${r.unit}`,
    r.baseline === null ? '-' : `${figure(r.baseline)} ${r.unit}`,
    r.ratio === null ? '-' : fmt(r.ratio, 3),
    r.summary,
    r.targets.map((t) => `${t.met ? '✓' : '✗'} ${t.label}${t.met ? '' : ` (${t.miss})`}`).join('; ') || '-',
  ]);
  return table(['scenario', 'parley', 'baseline', 'ratio', 'figures', 'targets'], rows);
}

/**
 * Scenario 5's verdict row: PostgreSQL's ratio of a scenario (`postgres`, a send or delivery row) against SQLite's
 * ratio of the same scenario in the same run (`sqlite`): value = PostgreSQL's ratio, baseline = SQLite's, ratio =
 * their quotient, target ≥ 0.5 (docs/benchmarks.md, "Targets"). → null when either row has no ratio (a failed
 * scenario).
 */
export function dialectComparison(
  scenario: 'send' | 'delivery',
  sqlite: ScenarioResult,
  postgres: ScenarioResult,
): ScenarioResult | null {
  if (sqlite.ratio === null || postgres.ratio === null || sqlite.ratio === 0) return null;
  const ratio = ratioOf(postgres.ratio, sqlite.ratio);
  return {
    id: `postgres-vs-sqlite-${scenario}`,
    title: `5. PostgreSQL against SQLite (${scenario})`,
    unit: 'of its baseline',
    value: postgres.ratio,
    baseline: sqlite.ratio,
    ratio,
    summary:
      `PostgreSQL ${fmt(postgres.value, 0)} ${postgres.unit} against its baseline's ${fmt(postgres.baseline ?? 0, 0)}; ` +
      `SQLite ${fmt(sqlite.value, 0)} against ${fmt(sqlite.baseline ?? 0, 0)}; ` +
      `absolute ${fmt(ratioOf(postgres.value, sqlite.value), 3)}× SQLite's`,
    targets: [target('≥ 0.5× SQLite’s ratio', ratio, '>=', 0.5)],
    details: { sqlite: sqlite.id, postgres: postgres.id, absolute: ratioOf(postgres.value, sqlite.value) },
  };
}
