import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startChild } from '../lib/ipc.ts';
import { type ScenarioResult, target } from '../lib/report.ts';
import { fmt, round } from '../lib/stats.ts';
import type { ScaleMeasurement } from '../roles/scale.ts';

/**
 * The targets of docs/benchmarks.md ("Targets"): under 20 KB resident memory per sandbox instance; 10,000 restored
 * in under 5 s.
 */
const KB_PER_INSTANCE = 20;
const RESTORE_MS_PER_10K = 5000;

/**
 * Scenario 4 for `count` instances: one child writes the store, a fresh child (`--expose-gc`) boots on it and
 * measures restoring every session (time, RSS and heap delta after GC). The baseline is the same booted process
 * before the restore (its RSS is shown). The restore-time target is scaled to `count` (5 s per 10,000).
 */
export async function scaleScenario(count: number): Promise<ScenarioResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-scale-'));
  const secretKey = randomBytes(32).toString('hex');
  let measured: ScaleMeasurement;
  let prepareMs: number;
  try {
    const writer = await startChild('scale');
    try {
      prepareMs = (await writer.call<{ ms: number }>('prepare', { dataDir, secretKey, count })).ms;
    } finally {
      await writer.stop();
    }
    const meter = await startChild('scale', { execArgv: ['--expose-gc'] });
    try {
      measured = await meter.call<ScaleMeasurement>('measure', { dataDir, secretKey, count });
    } finally {
      await meter.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const kb = (bytes: number) => round(bytes / 1024, 2);
  const restoreLimit = Math.round((RESTORE_MS_PER_10K * count) / 10_000);
  return {
    id: `scale-${count}`,
    title: `4. ${fmt(count, 0)} sandbox instances`,
    unit: 'KB/instance',
    value: kb(measured.perInstance.rss),
    baseline: null,
    ratio: null,
    summary:
      `restored ${fmt(measured.restored, 0)} in ${fmt(measured.restoreMs, 0)} ms; heap ` +
      `${kb(measured.perInstance.heapUsed)} KB/instance; RSS ${fmt(measured.before.rss / 2 ** 20, 0)} → ` +
      `${fmt(measured.after.rss / 2 ** 20, 0)} MiB` +
      (measured.threads.before === null
        ? ''
        : `; threads ${measured.threads.before} → ${measured.threads.after}`),
    targets: [
      target(
        `RSS < ${KB_PER_INSTANCE} KB/instance`,
        kb(measured.perInstance.rss),
        '<=',
        KB_PER_INSTANCE,
        ' KB',
      ),
      target(`restore ≤ ${fmt(restoreLimit / 1000, 1)} s`, measured.restoreMs, '<=', restoreLimit, ' ms'),
      target('every instance restored', count - measured.restored, '<=', 0, ' instances'),
    ],
    details: { ...measured, prepareMs },
  };
}
