import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import { type BenchChild, startChild } from '../lib/ipc.ts';
import {
  controlPost,
  eachLimited,
  type LiveTarget,
  type MemorySample,
  type ReconnectTiming,
} from '../lib/live.ts';
import { type ProfileSummary, summariseProfile } from '../lib/profile.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import { fmt, percentiles, round } from '../lib/stats.ts';
import type { ReceiverStats } from '../roles/receiver.ts';

/**
 * The targets of docs/benchmarks.md ("Targets"): memory per live session ≤ 1.3× bare Baileys; inbound throughput
 * ≥ 0.5× the baseline.
 */
const MEMORY_RATIO_MAX = 1.3;
const INBOUND_RATIO_MIN = 0.5;

/** Sizes of a live run. */
export interface LiveSettings {
  /** Sessions per side (200 full, 50 quick). */
  sessions: number;
  /** Inbound messages per side. */
  messages: number;
  /** Control-API sends in flight at once. */
  inFlight: number;
  /** Logins in flight at once. */
  loginConcurrency: number;
  /** Idle time before each memory sample, ms. */
  settleMs: number;
  /** Time-out of the inbound and reconnection phases, ms. */
  timeoutMs: number;
  /** Where to write a CPU profile of parley's process over the inbound phase (`--profile`); none when absent. */
  profileFile?: string;
  /** The baseline bot with parley's shared key-transaction storage (`--keyed-baseline`), not bare Baileys'. */
  keyedBaseline?: boolean;
}

/** Distinct simulated users sending the inbound messages. */
const CUSTOMERS = 20;

/** What one side (parley or the baseline) measured. */
interface SideMeasurement {
  loginMs: number;
  /** CPU profile of the inbound phase (parley's side, `--profile` only). */
  profile?: ProfileSummary;
  idle: MemorySample;
  loaded: MemorySample;
  /** (loaded − idle) / sessions, bytes. */
  perSession: { rss: number; heapUsed: number; heapTotal: number; external: number };
  inbound: {
    sent: number;
    /** Sends the simulator delivered to an open connection right away. */
    online: number;
    sendMs: number;
    /** First send → last receipt, ms. */
    totalMs: number;
    perSecond: number;
    receiver: ReceiverStats;
  };
  /** `closeMs`: the old simulator's close (state written); `restartMs`: until the new one listened. */
  reconnect: ReconnectTiming & {
    back: number;
    p50Ms: number;
    p90Ms: number;
    closeMs: number;
    restartMs: number;
  };
  /** The logins the restarted simulator saw (its connection log). */
  attempts: AttemptWave;
}

/** How the login attempts of a reconnection wave arrived at the restarted simulator. */
export interface AttemptWave {
  /** Login attempts seen (a refused or repeated one counts again). */
  logins: number;
  /** Accounts that attempted at least once. */
  accounts: number;
  /** First attempt of each account, ms after the restart began: earliest, median, latest. */
  firstMs: number;
  p50Ms: number;
  lastMs: number;
  /** Most attempts that opened within any 100 ms (a burst: every session at once). */
  peakPer100Ms: number;
}

/** Reads the restarted simulator's connection log into an {@link AttemptWave}; `since` is the restart, epoch ms. */
async function attemptWave(sim: Simulator, since: number): Promise<AttemptWave> {
  const response = await fetch(`${sim.control}/connections`);
  const { attempts } = (await response.json()) as {
    attempts: { at: string; kind: string; phone?: string }[];
  };
  const logins = attempts
    .filter((a) => a.kind === 'login')
    .map((a) => ({ ...a, ms: Date.parse(a.at) - since }));
  const first = new Map<string, number>();
  for (const a of logins) if (a.phone && !first.has(a.phone)) first.set(a.phone, a.ms);
  const firsts = [...first.values()].sort((a, b) => a - b);
  const times = logins.map((a) => a.ms).sort((a, b) => a - b);
  let peak = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] ?? 0) - (times[j] ?? 0) >= 100) j++;
    peak = Math.max(peak, i - j + 1);
  }
  return {
    logins: logins.length,
    accounts: first.size,
    firstMs: firsts[0] ?? 0,
    p50Ms: percentiles(firsts).p50,
    lastMs: firsts.at(-1) ?? 0,
    peakPer100Ms: peak,
  };
}

/**
 * Runs one side on a fresh simulator: accounts defined, the role's child booted (`--expose-gc`) and measured
 * idle, every account linked, measured again after the settle period, `messages` inbound texts from
 * {@link CUSTOMERS} users (round-robin over the accounts, `inFlight` control calls at once) counted at the
 * receiver, then the simulator restarted (closed, and started again on the same port with its state directory)
 * and the time until all sessions are back, with the spread of their login attempts.
 */
async function measureSide(
  role: 'live-parley' | 'live-baseline',
  settings: LiveSettings,
  receiver: BenchChild,
  hmacKey: string,
  log: (line: string) => void,
): Promise<SideMeasurement> {
  const stateDir = mkdtempSync(join(tmpdir(), 'parley-bench-sim-'));
  const simLog = pino({ level: 'silent' });
  let sim = await startSimulator({ log: simLog, stateDir });
  let child: BenchChild | undefined;
  let profile: ProfileSummary | undefined;
  try {
    const phones = Array.from({ length: settings.sessions }, (_, i) => `55219${String(i).padStart(8, '0')}`);
    const customers = Array.from({ length: CUSTOMERS }, (_, i) => `55319${String(i).padStart(8, '0')}`);
    for (const phone of [...phones, ...customers]) {
      await controlPost(sim.control, '/users', { phone, pushName: `bench ${phone.slice(-4)}` });
    }
    const { url: webhookUrl } = await receiver.call<{ url: string }>('url');
    const rootKey = sim.rootKey.toString('hex');
    child = await startChild(role, { execArgv: ['--expose-gc'] });
    const idle = await child.call<MemorySample>('boot', {
      simUrl: sim.url,
      rootKey,
      webhookUrl,
      hmacKey,
      settleMs: settings.settleMs,
      keyedStorages: role === 'live-baseline' && settings.keyedBaseline === true,
    });
    const liveTarget: LiveTarget = {
      simUrl: sim.url,
      control: sim.control,
      rootKey,
      phones,
      concurrency: settings.loginConcurrency,
      webhookUrl,
      hmacKey,
    };
    const { ms: loginMs } = await child.call<{ ms: number }>('login', liveTarget);
    log(`  ${role}: ${settings.sessions} sessions linked in ${fmt(loginMs / 1000, 1)} s`);
    const loaded = await child.call<MemorySample>('memory', { settleMs: settings.settleMs });

    await receiver.call('reset');
    const profiling = role === 'live-parley' && settings.profileFile !== undefined;
    if (profiling) await child.call('profileStart');
    let online = 0;
    const startedAt = Date.now();
    await eachLimited(settings.messages, settings.inFlight, async (k) => {
      const answer = (await controlPost(sim.control, '/messages', {
        from: customers[k % customers.length],
        to: phones[k % phones.length],
        text: `live bench ${k}`,
      })) as { online: number };
      online += answer.online > 0 ? 1 : 0;
    });
    const sendMs = Date.now() - startedAt;
    const received = await receiver.call<ReceiverStats>('waitFor', {
      count: settings.messages,
      timeoutMs: settings.timeoutMs,
    });
    const totalMs = Math.max(1, received.lastAt - startedAt);
    if (profiling && settings.profileFile !== undefined) {
      const file = await child.call<string>('profileStop', { file: settings.profileFile });
      profile = summariseProfile(file);
    }
    log(
      `  ${role}: ${received.unique}/${settings.messages} messages received in ${fmt(totalMs / 1000, 1)} s`,
    );

    // The platform restarts: every connection cut at once, the simulator back on the same port with its state.
    const since = Date.now();
    const waiting = child.call<ReconnectTiming>('waitBack', { since, timeoutMs: settings.timeoutMs });
    const port = sim.port;
    await sim.close();
    const closeMs = Date.now() - since;
    sim = await startSimulator({ log: simLog, stateDir, port });
    const restartMs = Date.now() - since;
    const back = await waiting;
    const attempts = await attemptWave(sim, since);
    log(
      `  ${role}: simulator restarted in ${fmt(restartMs / 1000, 1)} s (close ${fmt(closeMs / 1000, 1)} s); every session back ` +
        `${fmt(back.allBackMs / 1000, 1)} s after the restart began; first logins ${fmt(attempts.firstMs, 0)}–` +
        `${fmt(attempts.lastMs, 0)} ms, at most ${attempts.peakPer100Ms} in 100 ms`,
    );
    const spread = percentiles(back.backMs);
    return {
      loginMs,
      ...(profile ? { profile } : {}),
      idle,
      loaded,
      perSession: {
        rss: round((loaded.rss - idle.rss) / settings.sessions, 0),
        heapUsed: round((loaded.heapUsed - idle.heapUsed) / settings.sessions, 0),
        heapTotal: round((loaded.heapTotal - idle.heapTotal) / settings.sessions, 0),
        external: round((loaded.external - idle.external) / settings.sessions, 0),
      },
      inbound: {
        sent: settings.messages,
        online,
        sendMs,
        totalMs,
        perSecond: round((received.unique * 1000) / totalMs, 1),
        receiver: received,
      },
      reconnect: {
        ...back,
        back: back.backMs.length,
        p50Ms: spread.p50,
        p90Ms: spread.p90,
        closeMs,
        restartMs,
      },
      attempts,
    };
  } finally {
    await child?.stop(30_000);
    await sim.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/**
 * The live rows (docs/benchmarks.md): `live-memory`, `live-inbound` and `live-reconnect`, parley's live engine
 * against a hand-written Baileys bot measured in the same run on the same simulator build. `receiver` is the
 * running HTTPS receiver child.
 */
export async function liveScenario(
  settings: LiveSettings,
  receiver: BenchChild,
  hmacKey: string,
  log: (line: string) => void,
): Promise<ScenarioResult[]> {
  const parley = await measureSide('live-parley', settings, receiver, hmacKey, log);
  const baseline = await measureSide('live-baseline', settings, receiver, hmacKey, log);
  const kb = (bytes: number) => round(bytes / 1024, 1);
  const n = fmt(settings.sessions, 0);
  const memoryRatio = ratioOf(parley.perSession.rss, baseline.perSession.rss);
  const inboundRatio = ratioOf(parley.inbound.perSecond, baseline.inbound.perSecond);
  const lost = (side: SideMeasurement) => side.inbound.sent - side.inbound.receiver.unique;
  return [
    {
      id: 'live-memory',
      title: `6. live memory (${n} sessions)`,
      unit: 'KB/session',
      value: kb(parley.perSession.rss),
      baseline: kb(baseline.perSession.rss),
      ratio: memoryRatio,
      summary:
        `heap ${kb(parley.perSession.heapUsed)} KB/session (baseline ${kb(baseline.perSession.heapUsed)}); ` +
        `RSS idle → loaded ${fmt(parley.idle.rss / 2 ** 20, 0)} → ${fmt(parley.loaded.rss / 2 ** 20, 0)} MiB ` +
        `(baseline ${fmt(baseline.idle.rss / 2 ** 20, 0)} → ${fmt(baseline.loaded.rss / 2 ** 20, 0)} MiB); ` +
        `linked in ${fmt(parley.loginMs / 1000, 1)} s (baseline ${fmt(baseline.loginMs / 1000, 1)} s)`,
      targets: [target(`RSS ratio ≤ ${MEMORY_RATIO_MAX}`, memoryRatio, '<=', MEMORY_RATIO_MAX)],
      details: {
        sessions: settings.sessions,
        settleMs: settings.settleMs,
        parley: {
          idle: parley.idle,
          loaded: parley.loaded,
          perSession: parley.perSession,
          loginMs: parley.loginMs,
        },
        baseline: {
          idle: baseline.idle,
          loaded: baseline.loaded,
          perSession: baseline.perSession,
          loginMs: baseline.loginMs,
        },
      },
    },
    {
      id: 'live-inbound',
      title: `6. live inbound (${n} sessions)`,
      unit: 'msg/s',
      value: parley.inbound.perSecond,
      baseline: baseline.inbound.perSecond,
      ratio: inboundRatio,
      summary:
        `${parley.inbound.receiver.unique}/${parley.inbound.sent} received (baseline ` +
        `${baseline.inbound.receiver.unique}); p50/p99 ${fmt(parley.inbound.receiver.latency.p50, 0)}/` +
        `${fmt(parley.inbound.receiver.latency.p99, 0)} ms (baseline ${fmt(baseline.inbound.receiver.latency.p50, 0)}/` +
        `${fmt(baseline.inbound.receiver.latency.p99, 0)} ms); ${parley.inbound.receiver.badSignatures} bad signatures`,
      targets: [
        target(`ratio ≥ ${INBOUND_RATIO_MIN}`, inboundRatio, '>=', INBOUND_RATIO_MIN),
        target('nothing lost', lost(parley), '<=', 0, ' messages'),
      ],
      details: {
        messages: settings.messages,
        inFlight: settings.inFlight,
        parley: parley.inbound,
        baseline: baseline.inbound,
        ...(parley.profile ? { profile: parley.profile } : {}),
      },
    },
    {
      id: 'live-reconnect',
      title: `6. live reconnect (${n} sessions)`,
      unit: 'ms',
      value: parley.reconnect.allBackMs,
      baseline: baseline.reconnect.allBackMs,
      ratio: ratioOf(parley.reconnect.allBackMs, baseline.reconnect.allBackMs),
      summary:
        `all back in ${fmt(parley.reconnect.allBackMs / 1000, 1)} s, p50/p90 ${fmt(parley.reconnect.p50Ms, 0)}/` +
        `${fmt(parley.reconnect.p90Ms, 0)} ms (baseline ${fmt(baseline.reconnect.p50Ms, 0)}/` +
        `${fmt(baseline.reconnect.p90Ms, 0)} ms, reconnecting at once); simulator restarted with its state; ` +
        `first logins ${fmt(parley.attempts.firstMs, 0)}–${fmt(parley.attempts.lastMs, 0)} ms after the restart, ` +
        `at most ${parley.attempts.peakPer100Ms} in 100 ms (baseline ${fmt(baseline.attempts.firstMs, 0)}–` +
        `${fmt(baseline.attempts.lastMs, 0)} ms, at most ${baseline.attempts.peakPer100Ms})`,
      targets: [
        target(
          'every session back without a scan',
          settings.sessions - parley.reconnect.back,
          '<=',
          0,
          ' sessions',
        ),
      ],
      details: {
        fault: 'simulator closed and started again on the same port with its state directory',
        parley: { ...parley.reconnect, attempts: parley.attempts },
        baseline: { ...baseline.reconnect, attempts: baseline.attempts },
      },
    },
  ];
}
