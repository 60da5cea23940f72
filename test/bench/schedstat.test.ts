import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  describeShares,
  mainThreadTimes,
  medianShares,
  sharesBetween,
  type ThreadTimes,
} from '../../bench/lib/schedstat.ts';

const times = (onCoreNs: number, waitingNs: number, atMs: number): ThreadTimes => ({
  onCoreNs,
  waitingNs,
  atMs,
});

describe("the benchmark's main-thread shares (bench/lib/schedstat.ts)", () => {
  it('gives the shares of the wall time between two reads on a core and waiting for one', () => {
    // 4 s of wall time: 2.6 s on a core, 0.72 s waiting.
    assert.deepEqual(sharesBetween(times(1e9, 5e8, 1_000), times(3.6e9, 1.22e9, 5_000)), {
      onCorePercent: 65,
      waitingPercent: 18,
    });
  });

  it('prints the shares as the rows give them', () => {
    assert.equal(
      describeShares({ onCorePercent: 63, waitingPercent: 29 }),
      'on a core 63 %, waiting for one 29 %',
    );
  });

  it("takes several runs' shares as their medians, leaving out runs not measured", () => {
    assert.deepEqual(
      medianShares([
        { onCorePercent: 95, waitingPercent: 3 },
        undefined,
        { onCorePercent: 90, waitingPercent: 6 },
      ]),
      { onCorePercent: 93, waitingPercent: 5 },
    );
    assert.deepEqual(
      medianShares([
        { onCorePercent: 55, waitingPercent: 29 },
        { onCorePercent: 60, waitingPercent: 20 },
        { onCorePercent: 70, waitingPercent: 25 },
      ]),
      { onCorePercent: 60, waitingPercent: 25 },
    );
    assert.equal(medianShares([undefined]), undefined);
    assert.equal(medianShares([]), undefined);
  });

  it('gives nothing without both reads or without time between them', () => {
    assert.equal(sharesBetween(undefined, times(1, 1, 1)), undefined);
    assert.equal(sharesBetween(times(1, 1, 1), undefined), undefined);
    assert.equal(sharesBetween(times(1, 1, 5), times(2, 2, 5)), undefined);
  });

  it("reads a process's main thread from /proc, or nothing where /proc does not give it", () => {
    assert.equal(mainThreadTimes(2 ** 22 + 1), undefined, 'no such process');
    const before = mainThreadTimes(process.pid);
    if (process.platform !== 'linux') {
      assert.equal(before, undefined);
      return;
    }
    assert.ok(before !== undefined);
    // Work on this thread until the process has used 30 ms of CPU: most of it this thread's time on a core.
    const cpu = process.cpuUsage();
    let spin = 0;
    while (process.cpuUsage(cpu).user < 30_000) spin += Math.sqrt(spin + 1);
    const after = mainThreadTimes(process.pid);
    assert.ok(after !== undefined && spin > 0);
    const onCoreMs = (after.onCoreNs - before.onCoreNs) / 1e6;
    assert.ok(onCoreMs >= 15, `on a core ${onCoreMs} ms of the 30 ms of CPU spent`);
    // A running thread's own count is brought up to date at the scheduler's ticks (a few ms apart): a tick's slack.
    assert.ok(onCoreMs <= after.atMs - before.atMs + 10, 'no more time on a core than wall time');
    assert.ok(after.waitingNs >= before.waitingNs);
  });
});
