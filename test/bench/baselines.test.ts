import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dialectComparison, type ScenarioResult } from '../../bench/lib/report.ts';
import { median } from '../../bench/lib/stats.ts';

const row = (id: string, value: number, baseline: number | null, ratio: number | null): ScenarioResult => ({
  id,
  title: id,
  unit: 'events/s',
  value,
  baseline,
  ratio,
  summary: '',
  targets: [],
  details: {},
});

describe("the benchmark's bracketed baselines and dialect rows (bench/lib)", () => {
  it('takes the middle value, or the mean of the two middle ones, whatever the order; 0 for none', () => {
    assert.equal(median([12_315, 7_166, 9_852]), 9_852);
    assert.equal(median([9_000, 12_000, 7_000, 11_000]), 10_000);
    assert.equal(median([4_252]), 4_252);
    assert.equal(median([]), 0);
    const values = [3, 1, 2];
    median(values);
    assert.deepEqual(values, [3, 1, 2], 'the input is not sorted in place');
  });

  it("compares PostgreSQL's ratio with SQLite's of the same run against the 0.5× target", () => {
    const sqlite = row('delivery-sqlite', 3_000, 10_000, 0.3);
    const met = dialectComparison('delivery', sqlite, row('delivery-postgres', 1_500, 10_000, 0.15));
    assert.ok(met);
    assert.equal(met.id, 'postgres-vs-sqlite-delivery');
    assert.equal(met.value, 0.15);
    assert.equal(met.baseline, 0.3);
    assert.equal(met.ratio, 0.5);
    assert.deepEqual(
      met.targets.map((t) => [t.label, t.met, t.actual]),
      [['≥ 0.5× SQLite’s ratio', true, 0.5]],
    );
    assert.deepEqual(met.details, {
      sqlite: 'delivery-sqlite',
      postgres: 'delivery-postgres',
      absolute: 0.5,
    });

    const missed = dialectComparison(
      'send',
      row('send-sqlite', 4_000, 16_000, 0.25),
      row('send-postgres', 1_400, 16_500, 0.085),
    );
    assert.equal(missed?.ratio, 0.34);
    assert.equal(missed?.targets[0]?.met, false);
  });

  it('gives no row when either scenario failed (no ratio)', () => {
    const sqlite = row('send-sqlite', 4_000, 16_000, 0.25);
    assert.equal(dialectComparison('send', sqlite, row('send-postgres', 0, null, null)), null);
    assert.equal(dialectComparison('send', row('send-sqlite', 0, null, null), sqlite), null);
  });
});
