import { DEFAULT_LANE_WINDOW } from '../../src/config/env.ts';
import type { BenchChild } from '../lib/ipc.ts';
import { startChild } from '../lib/ipc.ts';
import { type ProfileSummary, summariseProfile } from '../lib/profile.ts';
import { ratioOf, type ScenarioResult, target, windowNote } from '../lib/report.ts';
import {
  describeShares,
  mainThreadTimes,
  medianShares,
  sharesBetween,
  type ThreadShares,
  type ThreadTimes,
} from '../lib/schedstat.ts';
import { serverCpuOf } from '../lib/server-cpu.ts';
import { fmt, median, round } from '../lib/stats.ts';
import type { ParleyReady } from '../roles/parley.ts';
import type { ReceiverStats } from '../roles/receiver.ts';

/** Settings of the webhook delivery scenario. */
export interface DeliverySettings {
  /** Events in the burst (the full run: 20,000; docs/benchmarks.md, "Scenarios"). */
  count: number;
  /**
   * Events sent before the measured burst, by each side (connections, TLS sessions, JIT): 5,000 in both runs, as
   * 1,000 left the baseline of a quick run at about two thirds of its warm rate (docs/benchmarks.md, step 75).
   */
  warmup: number;
  /** Instances the events are spread over (the worker sends one delivery per instance at a time). */
  instances: number;
  /** Lanes parley sends on at once (one per instance, up to its `WEBHOOK_CONCURRENCY`); the baseline uses as many connections. */
  concurrency: number;
  /** Steady rate of the latency phase, events per second, and its length in seconds. */
  pacedRate: number;
  pacedSeconds: number;
  /** Longest wait for a phase's deliveries, ms. */
  timeoutMs: number;
  dialect: 'sqlite' | 'postgres';
  databaseUrl?: string;
  hmacKey: string;
  /**
   * When set, a further burst of `count` events is CPU- and allocation-profiled inside the parley child (after the
   * measured phases, so profiling does not slow the figures) and written to this `.cpuprofile` file (the
   * `.heapprofile` beside it).
   */
  profileFile?: string;
  /** `WEBHOOK_LANE_WINDOW` of the parley child (`--lane-window`; default the service's, `DEFAULT_LANE_WINDOW` of src/config/env.ts). */
  laneWindow?: number;
  /** `DATABASE_PREPARED_STATEMENTS=off` in the parley child (`--unprepared`). */
  unprepared?: true;
  /** The round trip to PostgreSQL through `--pg-delay`'s network, ms, named in the title; absent when direct. */
  pgRoundTripMs?: number;
}

/** One phase's figures: events per second from the first event to the last receipt, and latencies. */
export interface DeliveryPhase {
  sent: number;
  received: number;
  duplicates: number;
  badSignatures: number;
  outOfOrder: number;
  eventsPerSecond: number;
  latencyMs: { p50: number; p99: number; max: number };
  /** First event to last receipt, ms. */
  elapsedMs: number;
  /**
   * CPU time the sending process used over the phase per event received, µs (user and system, every thread): for
   * parley recording and delivering each event, for the baseline posting it.
   */
  cpuPerEventUs: number;
  /**
   * On PostgreSQL, when the server runs on this machine: the CPU time its processes used over the phase per event
   * received, µs (bench/lib/server-cpu.ts). The store's side of each event, which `cpuPerEventUs` does not count.
   */
  serverCpuPerEventUs?: number;
  /**
   * The sending process's main thread's shares of the phase's wall time on a core and waiting for one
   * (bench/lib/schedstat.ts); absent where `/proc` does not give them.
   */
  mainThread?: ThreadShares;
}

/**
 * The figures of one phase: `sent` events started at `startedAt` (epoch ms) and received as `stats` says, with the
 * sending process's CPU over it (`cpuUs`, µs), the server's when measured, and the sending process's main thread
 * read when the phase started (`threadBefore`, bench/lib/schedstat.ts).
 */
function phase(
  sent: number,
  startedAt: number,
  stats: ReceiverStats,
  cpuUs: number,
  threadBefore: { pid: number; times: ThreadTimes | undefined },
  serverCpuUs?: number,
): DeliveryPhase {
  const mainThread = sharesBetween(threadBefore.times, mainThreadTimes(threadBefore.pid));
  const elapsedMs = Math.max(1, stats.lastAt - startedAt);
  return {
    sent,
    received: stats.unique,
    duplicates: stats.duplicates,
    badSignatures: stats.badSignatures,
    outOfOrder: stats.outOfOrder,
    eventsPerSecond: round((stats.unique / elapsedMs) * 1000, 0),
    latencyMs: { p50: stats.latency.p50, p99: stats.latency.p99, max: stats.latency.max },
    elapsedMs,
    cpuPerEventUs: round(cpuUs / Math.max(1, stats.unique), 0),
    ...(serverCpuUs === undefined
      ? {}
      : { serverCpuPerEventUs: round(serverCpuUs / Math.max(1, stats.unique), 0) }),
    ...(mainThread === undefined ? {} : { mainThread }),
  };
}

/**
 * Bursts the baseline sends before parley's phases and again after them; its figure is the median of all of them,
 * so neither a slow moment of the shared machine in one burst nor a drift over the scenario's minutes reads as
 * parley's (docs/benchmarks.md, "Method": bracketed baselines).
 */
export const BASELINE_BURSTS_EACH_SIDE = 2;

/**
 * One phase standing for several runs of the same phase: each figure (events per second, CPU per event, each
 * latency) the median of theirs; the counts those of the first run. `phases` must not be empty.
 */
function medianPhase(phases: readonly DeliveryPhase[]): DeliveryPhase {
  const first = phases[0];
  if (first === undefined) throw new Error('medianPhase: no phase');
  const of = (pick: (p: DeliveryPhase) => number) => round(median(phases.map(pick)), 0);
  const mainThread = medianShares(phases.map((p) => p.mainThread));
  return {
    ...first,
    ...(mainThread === undefined ? {} : { mainThread }),
    eventsPerSecond: of((p) => p.eventsPerSecond),
    cpuPerEventUs: of((p) => p.cpuPerEventUs),
    latencyMs: {
      p50: of((p) => p.latencyMs.p50),
      p99: of((p) => p.latencyMs.p99),
      max: of((p) => p.latencyMs.max),
    },
  };
}

/**
 * Scenario 2 (and 5 on PostgreSQL): `count` inbound sandbox events over `instances` instances, delivered by
 * parley's worker to the receiver (signatures checked there), against the same number of signed POSTs sent
 * directly with undici over `concurrency` keep-alive connections. Two phases each: a burst (every event at
 * once: events/s, nothing lost) and a steady rate below capacity (event-to-receipt latency).
 */
export async function deliveryScenario(
  settings: DeliverySettings,
  receiver: BenchChild,
): Promise<ScenarioResult> {
  const { url: webhookUrl } = await receiver.call<{ url: string }>('url');
  const pacedCount = settings.pacedRate * settings.pacedSeconds;

  const baseline = await startChild('baseline');
  const postBaseline = async (count: number, ratePerSecond: number) => {
    await receiver.call('reset');
    const cpuBefore = await baseline.call<number>('cpu');
    const threadBefore = { pid: baseline.pid, times: mainThreadTimes(baseline.pid) };
    const sent = await baseline.call<{ startedAt: number; failed: number }>('post', {
      url: webhookUrl,
      count,
      concurrency: settings.concurrency,
      instances: settings.instances,
      ratePerSecond,
      hmacKey: settings.hmacKey,
    });
    const stats = await receiver.call<ReceiverStats>('waitFor', { count, timeoutMs: settings.timeoutMs });
    return phase(
      count,
      sent.startedAt,
      stats,
      (await baseline.call<number>('cpu')) - cpuBefore,
      threadBefore,
    );
  };
  /** The baseline's bursts, before parley's phases and after them (`BASELINE_BURSTS_EACH_SIDE` each). */
  const baselineBursts: DeliveryPhase[] = [];
  const bracket = async () => {
    await postBaseline(settings.warmup, 0); // warm-up: TLS, JIT
    for (let i = 0; i < BASELINE_BURSTS_EACH_SIDE; i++)
      baselineBursts.push(await postBaseline(settings.count, 0));
  };

  let baselinePaced: DeliveryPhase;
  let burst: DeliveryPhase;
  let paced: DeliveryPhase;
  let statuses: Record<string, number>;
  let profile: ProfileSummary | undefined;
  try {
    await bracket();
    baselinePaced = await postBaseline(pacedCount, settings.pacedRate);
    const parley = await startChild('parley');
    try {
      await parley.call<ParleyReady>('setup', {
        dialect: settings.dialect,
        databaseUrl: settings.databaseUrl,
        instances: settings.instances,
        webhookUrl,
        hmacKey: settings.hmacKey,
        ...(settings.laneWindow === undefined ? {} : { laneWindow: settings.laneWindow }),
        ...(settings.unprepared ? { unprepared: true } : {}),
      });
      const server = await serverCpuOf(settings);
      const generate = async (count: number, ratePerSecond: number) => {
        await receiver.call('reset');
        const cpuBefore = await parley.call<number>('cpu');
        const serverBefore = server?.read();
        const threadBefore = { pid: parley.pid, times: mainThreadTimes(parley.pid) };
        const started = await parley.call<{ startedAt: number }>('generate', { count, ratePerSecond });
        const stats = await receiver.call<ReceiverStats>('waitFor', { count, timeoutMs: settings.timeoutMs });
        const serverUs =
          server === undefined || serverBefore === undefined
            ? undefined
            : (server.read() - serverBefore) * 1000;
        return phase(
          count,
          started.startedAt,
          stats,
          (await parley.call<number>('cpu')) - cpuBefore,
          threadBefore,
          serverUs,
        );
      };
      await generate(settings.warmup, 0); // warm-up
      burst = await generate(settings.count, 0);
      paced = await generate(pacedCount, settings.pacedRate);
      statuses = await parley.call<Record<string, number>>('deliveries');
      if (settings.profileFile !== undefined) {
        await parley.call('profileStart');
        await generate(settings.count, 0);
        const file = await parley.call<string>('profileStop', { file: settings.profileFile });
        profile = summariseProfile(file);
      }
    } finally {
      await parley.stop();
    }
    await bracket();
  } finally {
    await baseline.stop();
  }
  const baselineBurst = medianPhase(baselineBursts);

  const ratio = ratioOf(burst.eventsPerSecond, baselineBurst.eventsPerSecond);
  const missing = burst.sent - burst.received + (paced.sent - paced.received);
  const rejected = burst.badSignatures + paced.badSignatures;
  const queued = statuses.pending ?? 0;
  const failed = statuses.failed ?? 0;
  const unfinished =
    missing === 0
      ? ''
      : `; ${missing} not received within ${settings.timeoutMs / 1000} s (${queued} still queued, ${failed} failed)`;
  return {
    id: `delivery-${settings.dialect}`,
    title: `2. webhook delivery (${settings.dialect}${windowNote(settings.laneWindow)}${settings.unprepared ? ', unprepared' : ''}${settings.pgRoundTripMs === undefined ? '' : `, ${settings.pgRoundTripMs} ms away`})`,
    unit: 'events/s',
    value: burst.eventsPerSecond,
    baseline: baselineBurst.eventsPerSecond,
    ratio,
    summary:
      `${burst.received}/${burst.sent} burst events in ${round(burst.elapsedMs / 1000, 1)} s ` +
      `(baseline bursts ${baselineBursts.map((b) => fmt(b.eventsPerSecond, 0)).join(', ')} events/s: the median); ` +
      `(burst p99 ${burst.latencyMs.p99} ms vs ${baselineBurst.latencyMs.p99}); CPU per event ` +
      `${burst.cpuPerEventUs} µs vs ${baselineBurst.cpuPerEventUs} (${ratioOf(baselineBurst.cpuPerEventUs, burst.cpuPerEventUs)}); ` +
      (burst.serverCpuPerEventUs === undefined
        ? ''
        : `PostgreSQL's CPU per event ${burst.serverCpuPerEventUs} µs; `) +
      (burst.mainThread === undefined
        ? ''
        : `parley's main thread over the burst ${describeShares(burst.mainThread)}` +
          (baselineBurst.mainThread === undefined
            ? '; '
            : ` (the baseline's ${describeShares(baselineBurst.mainThread)}); `)) +
      `at ${settings.pacedRate}/s ` +
      `p50/p99 ${paced.latencyMs.p50}/${paced.latencyMs.p99} ms (baseline ` +
      `${baselinePaced.latencyMs.p50}/${baselinePaced.latencyMs.p99})${unfinished}`,
    targets: [
      target('ratio ≥ 0.5', ratio, '>=', 0.5),
      target('nothing lost (every event received)', missing, '<=', 0, ' events'),
      target('no failed delivery', failed, '<=', 0, ' deliveries'),
      target('every signature valid', rejected, '<=', 0, ' requests'),
    ],
    details: {
      instances: settings.instances,
      concurrency: settings.concurrency,
      laneWindow: settings.laneWindow ?? DEFAULT_LANE_WINDOW,
      parley: { burst, paced, deliveries: statuses },
      baseline: { burst: baselineBurst, bursts: baselineBursts, paced: baselinePaced },
      ...(profile ? { profile } : {}),
    },
  };
}
