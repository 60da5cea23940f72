import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChild } from '../lib/ipc.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import { PEER_PHONE } from '../roles/parley.ts';
import { type HttpSettings, setupOneInstance } from './send.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The last commit whose sends were relayed first and recorded after, before sends became jobs stored ahead of
 * their relay (docs/decisions/0009-sends-as-jobs.md). `BENCH_BEFORE_REF` measures against another ref.
 */
export const BEFORE_JOBS_REF = '189bb35';

/** Runs `role` loads of `POST /v1/messages/send` on a parley child started from `root` (undefined: this checkout). */
async function measure(
  settings: HttpSettings,
  root: string | undefined,
  headers: Record<string, string>[],
): Promise<LoadResult[]> {
  // Both sides from their TypeScript sources: the earlier commit predates the compiled build.
  const parley = await startChild('parley', root === undefined ? { sources: true } : { root });
  try {
    const ready = await setupOneInstance(parley, settings);
    const runs: LoadResult[] = [];
    for (const extra of headers) {
      runs.push(
        await runLoad({
          url: `${ready.url}/v1/messages/send`,
          method: 'POST',
          headers: { authorization: `Bearer ${ready.key}`, ...extra },
          body: { phone: PEER_PHONE, body: 'hello from the benchmark' },
          connections: settings.connections,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
        }),
      );
    }
    return runs;
  } finally {
    await parley.stop();
  }
}

/**
 * Scenario 8: the send path before and after sends became jobs, in the same run. The code of {@link
 * BEFORE_JOBS_REF} is checked out in a temporary git worktree (sharing this checkout's `node_modules`) and serves
 * synchronous sends; then the current code serves synchronous sends (the default answer) and queued ones
 * (`Prefer: respond-async`, answered 202 once stored). Targets: the synchronous default at least 0.9× the
 * earlier code, queued sends accepted at least as fast as synchronous ones.
 */
export async function sendPathScenario(settings: HttpSettings): Promise<ScenarioResult> {
  const ref = process.env.BENCH_BEFORE_REF || BEFORE_JOBS_REF;
  const dir = mkdtempSync(join(tmpdir(), 'parley-before-'));
  const worktree = join(dir, 'parley');
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', worktree, ref], { stdio: 'ignore' });
  try {
    if (!existsSync(join(worktree, 'node_modules')))
      symlinkSync(join(ROOT, 'node_modules'), join(worktree, 'node_modules'));
    const [before] = await measure(settings, worktree, [{}]);
    const [sync, queued] = await measure(settings, undefined, [{}, { prefer: 'respond-async' }]);
    if (!before || !sync || !queued) throw new Error('a load run is missing');
    const syncRatio = ratioOf(sync.requestsPerSecond, before.requestsPerSecond);
    const queuedRatio = ratioOf(queued.requestsPerSecond, sync.requestsPerSecond);
    return {
      id: `send-path-${settings.dialect}`,
      title: `8. send path before/after jobs (${settings.dialect})`,
      unit: 'req/s',
      value: sync.requestsPerSecond,
      baseline: before.requestsPerSecond,
      ratio: syncRatio,
      summary:
        `sync ${sync.requestsPerSecond} vs before ${before.requestsPerSecond} req/s (${syncRatio}×); queued ` +
        `${queued.requestsPerSecond} req/s (${queuedRatio}× sync); p50 sync ${sync.latencyMs.p50} / before ` +
        `${before.latencyMs.p50} / queued ${queued.latencyMs.p50} ms; non-2xx ${sync.non2xx + queued.non2xx + before.non2xx}`,
      targets: [
        target('sync ≥ 0.9× before', syncRatio, '>=', 0.9),
        target('queued ≥ 1.0× sync', queuedRatio, '>=', 1),
        target('no errors', sync.errors + sync.non2xx + queued.errors + queued.non2xx, '<=', 0),
      ],
      details: { ref, before, sync, queued },
    };
  } finally {
    execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', worktree], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}
