import { startChild } from '../lib/ipc.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import { type ProfileSummary, summariseProfile } from '../lib/profile.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';
import type { ParleyReady } from '../roles/parley.ts';

/** Settings of the auth overhead scenario. */
export interface AuthSettings {
  connections: number;
  durationS: number;
  warmupS: number;
  /**
   * When set, a further status run of the same length is CPU-profiled inside the parley child (after the measured
   * ones) and written to this `.cpuprofile` file.
   */
  profileFile?: string;
}

/**
 * Scenario 3: authenticated `GET /v1/session/status` (key check, scope, both rate-limit windows, instance
 * resolution, status) against the unauthenticated `GET /healthz` of the same parley process (SQLite, one
 * logged-in sandbox instance, no webhook), each loaded from this process over loopback.
 */
export async function authScenario(settings: AuthSettings, hmacKey: string): Promise<ScenarioResult> {
  const parley = await startChild('parley');
  let health: LoadResult;
  let status: LoadResult;
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
    health = await runLoad({ ...common, url: `${ready.url}/healthz` });
    const statusLoad = () =>
      runLoad({
        ...common,
        url: `${ready.url}/v1/session/status`,
        headers: { authorization: `Bearer ${ready.key}` },
      });
    status = await statusLoad();
    if (settings.profileFile !== undefined) {
      await parley.call('profileStart');
      await statusLoad();
      const file = await parley.call<string>('profileStop', { file: settings.profileFile });
      profile = summariseProfile(file);
    }
  } finally {
    await parley.stop();
  }
  const ratio = ratioOf(status.requestsPerSecond, health.requestsPerSecond);
  const failures = status.errors + status.non2xx + health.errors + health.non2xx;
  return {
    id: 'auth-overhead',
    title: '3. auth + rate limit (status vs healthz)',
    unit: 'req/s',
    value: status.requestsPerSecond,
    baseline: health.requestsPerSecond,
    ratio,
    summary:
      `p50/p99 ${status.latencyMs.p50}/${status.latencyMs.p99} ms (healthz ` +
      `${health.latencyMs.p50}/${health.latencyMs.p99} ms)${failures > 0 ? `, ${failures} failures` : ''}`,
    targets: [target('ratio ≥ 0.7', ratio, '>=', 0.7), target('no errors', failures, '<=', 0)],
    details: { status, healthz: health, connections: settings.connections, ...(profile ? { profile } : {}) },
  };
}
