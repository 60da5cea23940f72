import { startChild } from '../lib/ipc.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import { type ProfileSummary, summariseProfile } from '../lib/profile.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import type { ParleyReady } from '../roles/parley.ts';

/** Settings of the auth overhead scenario. */
export interface AuthSettings {
  connections: number;
  /** Length of the measured window of each round's two runs, seconds. */
  durationS: number;
  warmupS: number;
  /**
   * Rounds, each a healthz run followed at once by a status run (default 3): the ratio is the median of the rounds'
   * ratios, so a slowdown of the shared machine that lasts a while falls on both sides of one round.
   */
  rounds?: number;
  /**
   * When set, a further status run of the same length is CPU- and allocation-profiled inside the parley child (after
   * the measured ones) and written to this `.cpuprofile` file (the `.heapprofile` beside it).
   */
  profileFile?: string;
}

/** The median of `values` (the lower middle one of an even count); 0 when empty. */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
}

/**
 * Scenario 3: authenticated `GET /v1/session/status` (key check, scope, both rate-limit windows, instance
 * resolution, status) against the unauthenticated `GET /healthz` of the same parley process (SQLite, one
 * logged-in sandbox instance, no webhook), each loaded from this process over loopback. The two alternate in
 * rounds; the figures shown are those of the round whose ratio is the median, and every round is kept in the details.
 */
export async function authScenario(settings: AuthSettings, hmacKey: string): Promise<ScenarioResult> {
  const parley = await startChild('parley');
  const rounds: { health: LoadResult; status: LoadResult; ratio: number }[] = [];
  let profile: ProfileSummary | undefined;
  try {
    const ready = await parley.call<ParleyReady>('setup', {
      dialect: 'sqlite',
      instances: 1,
      webhookUrl: null,
      hmacKey,
    });
    const common = {
      method: 'GET' as const,
      connections: settings.connections,
      durationS: settings.durationS,
      warmupS: settings.warmupS,
    };
    const statusLoad = () =>
      runLoad({
        ...common,
        url: `${ready.url}/v1/session/status`,
        headers: { authorization: `Bearer ${ready.key}` },
      });
    for (let round = 0; round < (settings.rounds ?? 3); round += 1) {
      const health = await runLoad({ ...common, url: `${ready.url}/healthz` });
      const status = await statusLoad();
      rounds.push({ health, status, ratio: ratioOf(status.requestsPerSecond, health.requestsPerSecond) });
    }
    if (settings.profileFile !== undefined) {
      await parley.call('profileStart');
      await statusLoad();
      const file = await parley.call<string>('profileStop', { file: settings.profileFile });
      profile = summariseProfile(file);
    }
  } finally {
    await parley.stop();
  }
  const ratio = median(rounds.map((r) => r.ratio));
  const chosen = rounds.find((r) => r.ratio === ratio);
  if (!chosen) throw new Error('the auth scenario ran no round');
  const { health, status } = chosen;
  const failures = rounds.reduce(
    (sum, r) => sum + r.status.errors + r.status.non2xx + r.health.errors + r.health.non2xx,
    0,
  );
  return {
    id: 'auth-overhead',
    title: '3. auth + rate limit (status vs healthz)',
    unit: 'req/s',
    value: status.requestsPerSecond,
    baseline: health.requestsPerSecond,
    ratio,
    summary:
      `p50/p99 ${status.latencyMs.p50}/${status.latencyMs.p99} ms (healthz ` +
      `${health.latencyMs.p50}/${health.latencyMs.p99} ms); median of ${rounds.length} rounds, ratios ` +
      `${rounds.map((r) => r.ratio).join(', ')}${failures > 0 ? `; ${failures} failures` : ''}`,
    targets: [target('ratio ≥ 0.7', ratio, '>=', 0.7), target('no errors', failures, '<=', 0)],
    details: {
      status,
      healthz: health,
      rounds,
      connections: settings.connections,
      ...(profile ? { profile } : {}),
    },
  };
}
