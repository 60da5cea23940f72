/**
 * `npm run bench [-- --quick] [--only=send,delivery,auth,scale,live,cluster,sendpath,rowids] [--profile] [--keyed-baseline]
 * [--lane-window=N] [--unprepared] [--pg-delay=MS] [--from-sources]` —
 * parley's benchmarks.
 *
 * Process model: every server under test runs in a child process of its own (parley, or the baseline's bare
 * Fastify app / undici sender), the load generator (autocannon, programmatic) in this process, and the HTTPS
 * webhook receiver in a third process; everything talks over loopback (127.0.0.1) only. Each scenario's
 * baseline is measured in the same run, on the same machine, with the same process model. Prints a table and
 * writes `bench/results.json`. `BENCH_DATABASE_URL=postgres://…` adds the send and delivery scenarios on
 * PostgreSQL (scenario 5). Scenario 6 (`live`) runs parley's live engine and a bare Baileys bot on the platform
 * simulator (bench/scenarios/live.ts). Scenario 7 (`cluster`) runs three `parley serve` nodes on PostgreSQL and the
 * Redis of `BENCH_REDIS_URL` (bench/scenarios/cluster.ts); it needs both variables. `--quick` keeps the whole run
 * to about 2.5 minutes (shorter runs, fewer events, 1,000 instances, 50 live sessions); `--profile` adds a
 * CPU-profiled send run, delivery burst and status run, and profiles parley over the live inbound phase, summaries in the results;
 * `--keyed-baseline` gives the live baseline bot parley's one shared key-transaction storage; `--lane-window=N`
 * runs parley's send and delivery scenarios with N webhook requests in flight per lane (`WEBHOOK_LANE_WINDOW`);
 * `--unprepared` runs them on PostgreSQL without named prepared statements (`DATABASE_PREPARED_STATEMENTS=off`);
 * `--pg-delay=MS` puts a network between parley and PostgreSQL in those two scenarios: a proxy in a process of its
 * own (bench/roles/network.ts) that delays each direction by MS milliseconds; the round trip it makes is measured
 * and printed. parley's children run the compiled JavaScript of `dist/` that `npm start` runs (built first when its
 * sources changed); `--from-sources` runs its TypeScript through tsx instead, as development does.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_WEBHOOK_CONCURRENCY, MAX_LANE_WINDOW } from '../src/config/env.ts';
import { buildServer } from './lib/build.ts';
import { type BenchChild, parleyCode, startChild } from './lib/ipc.ts';
import { type PgNetwork, startPgNetwork } from './lib/pg-network.ts';
import { dialectComparison, machineInfo, resultsTable, type ScenarioResult } from './lib/report.ts';
import { authScenario } from './scenarios/auth.ts';
import { clusterScenario } from './scenarios/cluster.ts';
import { deliveryScenario } from './scenarios/delivery.ts';
import { liveScenario } from './scenarios/live.ts';
import { rowIdScenario } from './scenarios/row-ids.ts';
import { scaleScenario } from './scenarios/scale.ts';
import { sendScenario } from './scenarios/send.ts';
import { sendPathScenario } from './scenarios/send-path.ts';

const SCENARIOS = ['send', 'delivery', 'auth', 'scale', 'live', 'cluster', 'sendpath', 'rowids'] as const;
type ScenarioName = (typeof SCENARIOS)[number];

interface Options {
  quick: boolean;
  profile: boolean;
  keyedBaseline: boolean;
  only: Set<ScenarioName>;
  databaseUrl: string | undefined;
  /** Redis of the cluster scenario (`BENCH_REDIS_URL`). */
  redisUrl: string | undefined;
  /** `--lane-window=N`: parley's `WEBHOOK_LANE_WINDOW` in the send and delivery scenarios (default the service's, `DEFAULT_LANE_WINDOW` of src/config/env.ts). */
  laneWindow?: number;
  /** `--unprepared`: parley's `DATABASE_PREPARED_STATEMENTS=off` in the send and delivery scenarios. */
  unprepared?: true;
  /** `--pg-delay=MS`: each direction's delay, ms, of the network between parley and PostgreSQL in those scenarios. */
  pgDelayMs?: number;
  /** `--from-sources`: parley's children run its TypeScript through tsx instead of the compiled `dist/`. */
  fromSources: boolean;
}

/** Longest `--pg-delay`, ms each way. */
const MAX_PG_DELAY_MS = 100;

function parseArgs(argv: string[]): Options {
  const options: Options = {
    quick: false,
    profile: false,
    keyedBaseline: false,
    fromSources: false,
    only: new Set(SCENARIOS),
    databaseUrl: process.env.BENCH_DATABASE_URL || undefined,
    redisUrl: process.env.BENCH_REDIS_URL || undefined,
  };
  for (const arg of argv) {
    if (arg === '--quick') options.quick = true;
    else if (arg === '--profile') options.profile = true;
    else if (arg === '--keyed-baseline') options.keyedBaseline = true;
    else if (arg === '--unprepared') options.unprepared = true;
    else if (arg === '--from-sources') options.fromSources = true;
    else if (arg.startsWith('--pg-delay=')) {
      const delay = Number(arg.slice('--pg-delay='.length));
      if (!Number.isFinite(delay) || delay <= 0 || delay > MAX_PG_DELAY_MS)
        throw new Error(`--pg-delay: milliseconds each way, more than 0 and at most ${MAX_PG_DELAY_MS}`);
      options.pgDelayMs = delay;
    } else if (arg.startsWith('--lane-window=')) {
      const window = Number(arg.slice('--lane-window='.length));
      if (!Number.isInteger(window) || window < 1 || window > MAX_LANE_WINDOW)
        throw new Error(`--lane-window: a whole number from 1 to ${MAX_LANE_WINDOW} (WEBHOOK_LANE_WINDOW)`);
      options.laneWindow = window;
    } else if (arg.startsWith('--only=')) {
      const names = arg.slice('--only='.length).split(',');
      for (const name of names) {
        if (!SCENARIOS.includes(name as ScenarioName)) {
          throw new Error(`--only: unknown scenario ${name} (allowed: ${SCENARIOS.join(', ')})`);
        }
      }
      options.only = new Set(names as ScenarioName[]);
    } else
      throw new Error(
        `unknown option ${arg} (allowed: --quick, --only=a,b, --profile, --keyed-baseline, --lane-window=N, --unprepared, --pg-delay=MS, --from-sources)`,
      );
  }
  return options;
}

/** Durations and sizes of a full and of a quick run. */
function settingsFor(quick: boolean) {
  return quick
    ? {
        http: { connections: 50, durationS: 3, warmupS: 1 },
        delivery: { count: 2000, warmup: 5000, pacedRate: 200, pacedSeconds: 2, timeoutMs: 20_000 },
        scale: [1000],
        rowIds: { existing: 20_000, events: 10_000, perCommit: 32 },
        cluster: {
          instances: 12,
          connections: 48,
          durationS: 3,
          warmupS: 1,
          inboundS: 3,
          inboundConnections: 12,
          failover: { beforeMs: 1500, afterMs: 1500, pauseMs: 20 },
          timeoutMs: 60_000,
        },
        live: {
          sessions: 50,
          messages: 500,
          inFlight: 32,
          loginConcurrency: 8,
          settleMs: 5000,
          timeoutMs: 120_000,
        },
      }
    : {
        http: { connections: 50, durationS: 10, warmupS: 2 },
        delivery: { count: 20_000, warmup: 5000, pacedRate: 200, pacedSeconds: 5, timeoutMs: 150_000 },
        scale: [1000, 10_000],
        rowIds: { existing: 200_000, events: 40_000, perCommit: 32 },
        cluster: {
          instances: 12,
          connections: 48,
          durationS: 10,
          warmupS: 2,
          inboundS: 8,
          inboundConnections: 12,
          failover: { beforeMs: 3000, afterMs: 3000, pauseMs: 20 },
          timeoutMs: 90_000,
        },
        live: {
          sessions: 200,
          messages: 2000,
          inFlight: 32,
          loginConcurrency: 8,
          settleMs: 15_000,
          timeoutMs: 300_000,
        },
      };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const settings = settingsFor(options.quick);
  const machine = machineInfo();
  const startedAt = new Date();
  const hmacKey = randomBytes(24).toString('hex');
  const log = (line: string) => process.stdout.write(`${line}\n`);
  log(
    `parley benchmarks (${options.quick ? 'quick' : 'full'}): ${machine.cpuModel}, ${machine.cores} cores, ` +
      `${machine.memoryGiB} GiB, Node ${machine.node}`,
  );
  if (options.fromSources) {
    parleyCode('sources');
    log("parley's children run its TypeScript sources through tsx (--from-sources)");
  } else {
    buildServer();
  }
  const dialects: ('sqlite' | 'postgres')[] = options.databaseUrl ? ['sqlite', 'postgres'] : ['sqlite'];
  if (!options.databaseUrl)
    log('PostgreSQL scenarios not run: set BENCH_DATABASE_URL=postgres://… to add them');
  const clusterStores =
    options.databaseUrl && options.redisUrl
      ? { databaseUrl: options.databaseUrl, redisUrl: options.redisUrl }
      : undefined;
  if (options.only.has('cluster') && !clusterStores)
    log('cluster scenario not run: it needs BENCH_DATABASE_URL=postgres://… and BENCH_REDIS_URL=redis://…');
  const results: ScenarioResult[] = [];
  const record = (result: ScenarioResult) => {
    results.push(result);
    log(`${resultsTable([result]).split('\n').at(-1)}`);
  };
  /**
   * Runs one scenario, which may give several rows; a failure is reported as a row (and in results.json) and
   * the run goes on.
   */
  const run = async (
    id: string,
    title: string,
    scenario: () => Promise<ScenarioResult | ScenarioResult[]>,
  ) => {
    log(`running: ${title}…`);
    try {
      const rows = await scenario();
      for (const row of Array.isArray(rows) ? rows : [rows]) record(row);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log(`${title} failed: ${message}`);
      record({
        id,
        title,
        unit: '',
        value: 0,
        baseline: null,
        ratio: null,
        summary: `failed: ${message.split('\n')[0]}`,
        targets: [
          { label: 'scenario ran', met: false, actual: 0, limit: 1, direction: '>=', miss: 'failed' },
        ],
        details: { error: message },
      });
    }
  };

  let receiver: BenchChild | undefined;
  let network: PgNetwork | undefined;
  try {
    if (options.pgDelayMs !== undefined && !options.databaseUrl)
      log('--pg-delay ignored: it delays PostgreSQL, and BENCH_DATABASE_URL is not set');
    if (options.pgDelayMs !== undefined && options.databaseUrl) {
      network = await startPgNetwork(options.databaseUrl, options.pgDelayMs);
      log(
        `PostgreSQL behind a ${network.delayMs} ms-each-way proxy for the send and delivery scenarios: round trip ` +
          `${network.roundTripMs} ms (direct ${network.directRoundTripMs} ms)`,
      );
    }
    if (
      options.only.has('send') ||
      options.only.has('sendpath') ||
      options.only.has('delivery') ||
      options.only.has('live') ||
      (options.only.has('cluster') && clusterStores)
    ) {
      receiver = await startChild('receiver');
      await receiver.call('start', { hmacKey });
    }
    for (const dialect of dialects) {
      const databaseUrl = dialect === 'postgres' ? (network?.url ?? options.databaseUrl) : undefined;
      const away = dialect === 'postgres' && network ? { pgRoundTripMs: network.roundTripMs } : {};
      const withReceiver = receiver;
      if (options.only.has('send') && withReceiver) {
        const { url } = await withReceiver.call<{ url: string }>('url');
        await run(`send-${dialect}`, `1. send text (${dialect})`, () =>
          sendScenario({
            ...settings.http,
            dialect,
            ...(databaseUrl ? { databaseUrl } : {}),
            hmacKey,
            webhookUrl: url,
            ...(options.laneWindow === undefined ? {} : { laneWindow: options.laneWindow }),
            ...(options.unprepared ? { unprepared: true } : {}),
            ...away,
            ...(options.profile ? { profileFile: join(tmpdir(), `parley-send-${dialect}.cpuprofile`) } : {}),
          }),
        );
      }
      if (options.only.has('sendpath') && withReceiver) {
        const { url } = await withReceiver.call<{ url: string }>('url');
        await run(`send-path-${dialect}`, `8. send path before/after jobs (${dialect})`, () =>
          sendPathScenario({
            ...settings.http,
            dialect,
            ...(databaseUrl ? { databaseUrl } : {}),
            hmacKey,
            webhookUrl: url,
          }),
        );
      }
      if (options.only.has('delivery') && withReceiver) {
        await run(`delivery-${dialect}`, `2. webhook delivery (${dialect})`, () =>
          deliveryScenario(
            {
              ...settings.delivery,
              instances: 16,
              // Parley sends on one lane per instance, up to WEBHOOK_CONCURRENCY (64) at once: 16 here.
              concurrency: Math.min(DEFAULT_WEBHOOK_CONCURRENCY, 16),
              dialect,
              ...(databaseUrl ? { databaseUrl } : {}),
              hmacKey,
              ...(options.laneWindow === undefined ? {} : { laneWindow: options.laneWindow }),
              ...(options.unprepared ? { unprepared: true } : {}),
              ...away,
              ...(options.profile
                ? { profileFile: join(tmpdir(), `parley-delivery-${dialect}.cpuprofile`) }
                : {}),
            },
            withReceiver,
          ),
        );
      }
    }
    if (options.only.has('live') && receiver) {
      const withReceiver = receiver;
      await run('live', `6. live sessions on the simulator (${settings.live.sessions})`, () =>
        liveScenario(
          {
            ...settings.live,
            ...(options.profile ? { profileFile: join(tmpdir(), 'parley-live-inbound.cpuprofile') } : {}),
            keyedBaseline: options.keyedBaseline,
          },
          withReceiver,
          hmacKey,
          log,
        ),
      );
    }
    if (options.only.has('cluster') && clusterStores && receiver) {
      const withReceiver = receiver;
      const stores = clusterStores;
      await run('cluster', '7. three nodes (PostgreSQL + Redis)', () =>
        clusterScenario({ ...settings.cluster, ...stores, hmacKey }, withReceiver, log),
      );
    }
    for (const scenario of ['send', 'delivery'] as const) {
      const sqlite = results.find((r) => r.id === `${scenario}-sqlite`);
      const postgres = results.find((r) => r.id === `${scenario}-postgres`);
      const row = sqlite && postgres ? dialectComparison(scenario, sqlite, postgres) : null;
      if (row) record(row);
    }
  } finally {
    await receiver?.stop();
    await network?.stop();
  }
  if (options.only.has('auth')) {
    await run('auth-overhead', '3. auth + rate limit (status vs healthz)', () =>
      authScenario(
        {
          ...settings.http,
          ...(options.profile ? { profileFile: join(tmpdir(), 'parley-auth.cpuprofile') } : {}),
        },
        hmacKey,
      ),
    );
  }
  if (options.only.has('rowids')) {
    await run('row-ids', '9. row ids (SQLite write per event)', () => rowIdScenario(settings.rowIds));
  }
  if (options.only.has('scale')) {
    for (const count of settings.scale) {
      await run(`scale-${count}`, `4. ${count} sandbox instances`, () => scaleScenario(count));
    }
  }

  const finishedAt = new Date();
  log('');
  log(resultsTable(results));
  const missed = results.flatMap((r) => r.targets.filter((t) => !t.met).map((t) => `${r.title}: ${t.label}`));
  log('');
  log(missed.length === 0 ? 'every target met' : `targets missed: ${missed.join('; ')}`);
  const file = fileURLToPath(new URL('./results.json', import.meta.url));
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        mode: options.quick ? 'quick' : 'full',
        startedAt: startedAt.toISOString(),
        durationS: Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000),
        machine,
        ...(network
          ? {
              pgNetwork: {
                delayMs: network.delayMs,
                roundTripMs: network.roundTripMs,
                directRoundTripMs: network.directRoundTripMs,
              },
            }
          : {}),
        processModel:
          'server under test in its own child process; autocannon in the runner; HTTPS receiver in a third process; loopback only',
        parleyCode: options.fromSources
          ? 'TypeScript sources through tsx'
          : 'compiled dist/ (what npm start runs)',
        results,
      },
      null,
      2,
    )}\n`,
  );
  log(`results written to ${file} (${Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000)} s)`);
}

await main();
