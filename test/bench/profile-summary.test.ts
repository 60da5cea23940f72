import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { summariseProfile } from '../../bench/lib/profile.ts';

const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber });

describe("the benchmark's profile summary (bench/lib/profile.ts)", () => {
  it("leaves the inspector's own samples out of every figure and counts them apart", () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-profile-'));
    try {
      const file = join(dir, 'run.cpuprofile');
      const profile = {
        nodes: [
          { id: 1, callFrame: frame('(root)'), children: [2, 3, 4, 6] },
          { id: 2, callFrame: frame('(idle)') },
          { id: 3, callFrame: frame('run') },
          { id: 4, callFrame: frame('post', 'node:inspector', 110), children: [5] },
          { id: 5, callFrame: frame('dispatch') },
          { id: 6, callFrame: frame('send', 'file:///app/dist/src/sends/queue.js', 9) },
        ],
        startTime: 0,
        endTime: 1_000_000,
        // 100 ms idle, 300 ms in SQLite's run, 100 ms in the send, 500 ms inside the inspector's dispatch.
        samples: [2, 3, 3, 3, 6, 5, 5, 5, 5, 5],
        timeDeltas: Array.from({ length: 10 }, () => 100_000),
      };
      writeFileSync(file, JSON.stringify(profile));
      const summary = summariseProfile(file, 5);
      assert.equal(summary.totalMs, 500);
      assert.equal(summary.profilerMs, 500);
      assert.equal(summary.idlePercent, 20);
      assert.deepEqual(summary.byArea, [
        { name: 'native: run', ms: 300, percent: 60 },
        { name: 'idle', ms: 100, percent: 20 },
        { name: 'src/sends', ms: 100, percent: 20 },
      ]);
      assert.deepEqual(
        summary.totalTop.map((entry) => entry.name),
        ['send src/sends/queue.js:10'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
