import { DEFAULT_LANE_WINDOW } from '../../src/config/env.ts';
import { type BenchChild, startChild } from '../lib/ipc.ts';
import { type LoadOptions, type LoadResult, runLoad } from '../lib/load.ts';
import {
  allocationFileOf,
  type ProfileSummary,
  summariseAllocations,
  summariseProfile,
} from '../lib/profile.ts';
import { ratioOf, type ScenarioResult, target, windowNote } from '../lib/report.ts';
import {
  describeShares,
  mainThreadTimes,
  medianShares,
  sharesBetween,
  type ThreadShares,
} from '../lib/schedstat.ts';
import { type ServerCpu, serverCpuOf } from '../lib/server-cpu.ts';
import { fmt, median, round, sleep } from '../lib/stats.ts';
import { type ParleyReady, PEER_PHONE } from '../roles/parley.ts';

/** Settings of the send and auth scenarios. */
export interface HttpSettings {
  /** Concurrent connections (the full run: 50; docs/benchmarks.md, "Scenarios"). */
  connections: number;
  durationS: number;
  warmupS: number;
  dialect: 'sqlite' | 'postgres';
  databaseUrl?: string;
  /**
   * When set, a further run of the same length is CPU- and allocation-profiled inside the parley child (after the
   * measured one, so profiling does not slow the figures) and written to this `.cpuprofile` file (the `.heapprofile`
   * beside it); the send scenario profiles its baseline the same way, into the same name with `-baseline` added,
   * and reports the bytes each allocated and the promises each created per request.
   */
  profileFile?: string;
  /** HMAC key of the webhook (receiver checks it). */
  hmacKey: string;
  /** The benchmark receiver's URL. */
  webhookUrl: string;
  /** `WEBHOOK_LANE_WINDOW` of the parley child (`--lane-window`; default the service's, `DEFAULT_LANE_WINDOW` of src/config/env.ts). */
  laneWindow?: number;
  /** `DATABASE_PREPARED_STATEMENTS=off` in the parley child (`--unprepared`). */
  unprepared?: true;
  /** The round trip to PostgreSQL through `--pg-delay`'s network, ms, named in the title; absent when direct. */
  pgRoundTripMs?: number;
}

/** How long after a send run its webhooks may still be in flight to count as keeping pace, ms. */
const DELIVERY_GRACE_MS = 2_000;

/**
 * Sets up the parley child for a send run: one logged-in sandbox instance on the settings' store, its webhook
 * subscribed to the benchmark receiver with the settings' HMAC key. → the URL and key to load.
 */
export function setupOneInstance(parley: BenchChild, settings: HttpSettings): Promise<ParleyReady> {
  return parley.call<ParleyReady>('setup', {
    dialect: settings.dialect,
    databaseUrl: settings.databaseUrl,
    instances: 1,
    webhookUrl: settings.webhookUrl,
    hmacKey: settings.hmacKey,
    ...(settings.laneWindow === undefined ? {} : { laneWindow: settings.laneWindow }),
    ...(settings.unprepared ? { unprepared: true } : {}),
  });
}

/**
 * A measured load run on `child` and the CPU time the child used over it: `warmupS` of load first, unmeasured, then
 * `durationS` measured, with the child's `cpu` read between the two and after (user and system, every thread), and
 * `server`'s (a local PostgreSQL, bench/lib/server-cpu.ts) when given, and the child's main thread's shares of the
 * run's wall time on a core and waiting for one (bench/lib/schedstat.ts; absent where `/proc` does not give them).
 * @returns the measured run, the child's CPU per completed request, µs, the server's when measured, and the main
 *   thread's shares.
 */
async function loadWithCpu(
  child: BenchChild,
  options: LoadOptions,
  server?: ServerCpu,
): Promise<{
  run: LoadResult;
  cpuPerRequestUs: number;
  serverCpuPerRequestUs?: number;
  mainThread?: ThreadShares;
}> {
  if (options.warmupS > 0) await runLoad({ ...options, durationS: options.warmupS, warmupS: 0 });
  const before = await child.call<number>('cpu');
  const serverBefore = server?.read();
  const threadBefore = mainThreadTimes(child.pid);
  const run = await runLoad({ ...options, warmupS: 0 });
  const mainThread = sharesBetween(threadBefore, mainThreadTimes(child.pid));
  const used = (await child.call<number>('cpu')) - before;
  const requests = Math.max(1, run.completed);
  const cpuPerRequestUs = Math.round(used / requests);
  const shares = mainThread === undefined ? {} : { mainThread };
  if (server === undefined || serverBefore === undefined) return { run, cpuPerRequestUs, ...shares };
  const serverCpuPerRequestUs = Math.round(((server.read() - serverBefore) * 1000) / requests);
  return { run, cpuPerRequestUs, serverCpuPerRequestUs, ...shares };
}

/** Where the baseline's profiled run is written: beside parley's, `-baseline` added to its name. */
function baselineProfileFile(file: string): string {
  return file.replace(/(\.[^./]*)?$/, '-baseline$1');
}

/** What a profiled run measured per completed request. */
interface ProfiledFigures {
  /** Bytes allocated (V8's sampling heap profiler, collected objects included). */
  allocatedBytes: number;
  /** Promises created (bench/lib/promise-count.ts). */
  promises: number;
}

/**
 * A load run of `options` on `child` under the CPU and allocation profiler, written to `file` (and the
 * `.heapprofile` beside it), with the promises `child` creates counted. → per completed request, the bytes `child`
 * allocated and the promises it created over the run.
 */
async function profiledRun(child: BenchChild, options: LoadOptions, file: string): Promise<ProfiledFigures> {
  await child.call('profileStart');
  await child.call('promisesStart');
  const run = await runLoad(options);
  const promises = await child.call<number>('promisesStop');
  await child.call<string>('profileStop', { file });
  if (run.errors + run.non2xx > 0) {
    console.warn(
      `profiled run of ${file}: ${run.errors} errors, ${run.non2xx} non-2xx answers among the requests`,
    );
  }
  const completed = Math.max(1, run.completed);
  return {
    allocatedBytes: summariseAllocations(allocationFileOf(file), 0).totalBytes / completed,
    promises: promises / completed,
  };
}

function describeErrors(run: LoadResult): string {
  return run.errors + run.non2xx === 0 ? '' : `, ${run.errors} errors, ${run.non2xx} non-2xx`;
}

/**
 * One load run standing for several runs of the same load: requests per second and each latency the median of
 * theirs, the counts (completed, errors) their sums. The send scenario measures its bare route before parley's run
 * and again after it, so a drift of the shared machine over the scenario falls on both sides of the ratio
 * (docs/benchmarks.md, "Method": bracketed baselines). `runs` must not be empty.
 */
function medianRun(runs: readonly LoadResult[]): LoadResult {
  const of = (pick: (r: LoadResult) => number) => round(median(runs.map(pick)), 2);
  const sum = (pick: (r: LoadResult) => number) => runs.reduce((total, r) => total + pick(r), 0);
  return {
    requestsPerSecond: of((r) => r.requestsPerSecond),
    latencyMs: {
      p50: of((r) => r.latencyMs.p50),
      p90: of((r) => r.latencyMs.p90),
      p99: of((r) => r.latencyMs.p99),
      max: of((r) => r.latencyMs.max),
      mean: of((r) => r.latencyMs.mean),
    },
    completed: sum((r) => r.completed),
    durationS: sum((r) => r.durationS),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    non2xx: sum((r) => r.non2xx),
  };
}

/**
 * Scenario 1 (and 5 on PostgreSQL): `POST /v1/messages/send` with a test key on a logged-in sandbox instance
 * whose webhook is subscribed, `connections` connections, against a bare Fastify route answering a send result
 * (baseline role), each in its own child process and loaded from this process over loopback.
 */
export async function sendScenario(settings: HttpSettings): Promise<ScenarioResult> {
  const baseline = await startChild('baseline');
  const baselineRuns: { run: LoadResult; cpuPerRequestUs: number; mainThread?: ThreadShares }[] = [];
  let baselineProfiled: ProfiledFigures | undefined;
  let run: LoadResult;
  let cpuPerSend: number;
  let serverCpuPerSend: number | undefined;
  let mainThread: ThreadShares | undefined;
  let deliveries: Record<string, number>;
  let deliveredInRun: number;
  let profile: ProfileSummary | undefined;
  let profiled: ProfiledFigures | undefined;
  try {
    const { url } = await baseline.call<{ url: string }>('serve', {});
    const baselineOptions = (warmupS: number) => ({
      url: `${url}/v1/messages/send`,
      method: 'POST' as const,
      body: { phone: PEER_PHONE, body: 'hello from the benchmark' },
      connections: settings.connections,
      durationS: settings.durationS,
      warmupS,
    });
    baselineRuns.push(await loadWithCpu(baseline, baselineOptions(settings.warmupS)));
    if (settings.profileFile !== undefined) {
      baselineProfiled = await profiledRun(
        baseline,
        baselineOptions(0),
        baselineProfileFile(settings.profileFile),
      );
    }
    const parley = await startChild('parley');
    try {
      const ready = await setupOneInstance(parley, settings);
      const options = (warmupS: number) => ({
        url: `${ready.url}/v1/messages/send`,
        method: 'POST' as const,
        headers: { authorization: `Bearer ${ready.key}` },
        body: { phone: PEER_PHONE, body: 'hello from the benchmark' },
        connections: settings.connections,
        durationS: settings.durationS,
        warmupS,
      });
      const server = await serverCpuOf(settings);
      ({
        run,
        cpuPerRequestUs: cpuPerSend,
        serverCpuPerRequestUs: serverCpuPerSend,
        mainThread,
      } = await loadWithCpu(parley, options(settings.warmupS), server));
      // Delivered by the run's end (the warm-up's included): the delivery work the run shared the machine with.
      deliveredInRun = (await parley.call<Record<string, number>>('deliveries')).delivered ?? 0;
      // Deliveries keep pace when the run's webhooks are delivered within 2 s of its end.
      await sleep(DELIVERY_GRACE_MS);
      deliveries = await parley.call<Record<string, number>>('deliveries');
      if (settings.profileFile !== undefined) {
        profiled = await profiledRun(parley, options(0), settings.profileFile);
        profile = summariseProfile(settings.profileFile);
      }
    } finally {
      await parley.stop();
    }
    baselineRuns.push(await loadWithCpu(baseline, baselineOptions(settings.warmupS)));
  } finally {
    await baseline.stop();
  }
  const baselineRun = medianRun(baselineRuns.map((r) => r.run));
  const baselineCpu = Math.round(median(baselineRuns.map((r) => r.cpuPerRequestUs)));
  // The bare route's shares over its runs before and after parley's, as its other figures: the medians.
  const baselineShares = medianShares(baselineRuns.map((r) => r.mainThread));
  const ratio = ratioOf(run.requestsPerSecond, baselineRun.requestsPerSecond);
  const queued = Object.values(deliveries).reduce((a, b) => a + b, 0);
  const delivered = deliveries.delivered ?? 0;
  const kept = queued === 0 ? 0 : Math.round((delivered / queued) * 1000) / 1000;
  const result: ScenarioResult = {
    id: `send-${settings.dialect}`,
    title: `1. send text (${settings.dialect}${windowNote(settings.laneWindow)}${settings.unprepared ? ', unprepared' : ''}${settings.pgRoundTripMs === undefined ? '' : `, ${settings.pgRoundTripMs} ms away`})`,
    unit: 'req/s',
    value: run.requestsPerSecond,
    baseline: baselineRun.requestsPerSecond,
    ratio,
    summary:
      `bare route before and after ${baselineRuns.map((r) => fmt(r.run.requestsPerSecond, 0)).join(' and ')} req/s ` +
      `(the mean); p50 ${run.latencyMs.p50} / p99 ${run.latencyMs.p99} ms (baseline ${baselineRun.latencyMs.p50} / ` +
      `${baselineRun.latencyMs.p99} ms)${describeErrors(run)}; webhooks delivered ${fmt(delivered, 0)} of ` +
      `${fmt(queued, 0)} (${kept}) ${DELIVERY_GRACE_MS / 1000} s after the run, ${fmt(deliveredInRun, 0)} by its end; ` +
      `CPU per request ${cpuPerSend} µs vs ${baselineCpu} (${ratioOf(baselineCpu, cpuPerSend)})` +
      (mainThread === undefined
        ? ''
        : `; parley's main thread ${describeShares(mainThread)}` +
          (baselineShares === undefined ? '' : ` (the bare route's ${describeShares(baselineShares)})`)) +
      (serverCpuPerSend === undefined ? '' : `; PostgreSQL's CPU per request ${serverCpuPerSend} µs`) +
      (profiled === undefined || baselineProfiled === undefined
        ? ''
        : `; allocated per request (profiled runs) ${fmt(profiled.allocatedBytes / 1024, 1)} KiB vs ` +
          `${fmt(baselineProfiled.allocatedBytes / 1024, 1)}; promises per request ${fmt(profiled.promises, 0)} ` +
          `vs ${fmt(baselineProfiled.promises, 0)}`),
    targets: [
      target('ratio ≥ 0.4', ratio, '>=', 0.4),
      target('p99 ≤ 20 ms', run.latencyMs.p99, '<=', 20, ' ms'),
      target('no errors', run.errors + run.non2xx, '<=', 0),
      target('deliveries keep pace (≥ 0.9 delivered 2 s after)', kept, '>=', 0.9),
    ],
    details: {
      laneWindow: settings.laneWindow ?? DEFAULT_LANE_WINDOW,
      parley: run,
      baseline: baselineRun,
      baselineRuns: baselineRuns.map((r) => r.run),
      cpuPerRequestUs: {
        parley: cpuPerSend,
        baseline: baselineCpu,
        ...(serverCpuPerSend === undefined ? {} : { postgres: serverCpuPerSend }),
      },
      connections: settings.connections,
      deliveries,
      deliveredInRun,
      ...(mainThread === undefined ? {} : { mainThread }),
      ...(baselineShares === undefined ? {} : { baselineMainThread: baselineShares }),
      ...(profile ? { profile } : {}),
      ...(profiled === undefined || baselineProfiled === undefined
        ? {}
        : {
            allocatedBytesPerRequest: {
              parley: Math.round(profiled.allocatedBytes),
              baseline: Math.round(baselineProfiled.allocatedBytes),
            },
            promisesPerRequest: {
              parley: Math.round(profiled.promises),
              baseline: Math.round(baselineProfiled.promises),
            },
          }),
    },
  };
  return result;
}
