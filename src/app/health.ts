import type { Clock } from '../domain/clock.ts';
import type { Store } from '../store/database.ts';
import { attemptsIn, messageBuckets, statusChanges } from '../store/health.ts';

/** The windows a health report covers, with their bucket width (docs/decisions/0042-dashboard-health.md). */
export const HEALTH_RANGES = {
  '1h': { windowMs: 60 * 60_000, bucketMs: 5 * 60_000 },
  '24h': { windowMs: 24 * 60 * 60_000, bucketMs: 60 * 60_000 },
  '7d': { windowMs: 7 * 24 * 60 * 60_000, bucketMs: 6 * 60 * 60_000 },
} as const;

/** A window name: `1h` (5-minute buckets), `24h` (hourly) or `7d` (6-hourly). */
export type HealthRange = keyof typeof HEALTH_RANGES;

/** One bucket of a health report: counts, and the latency of the webhook attempts started in it (ms). */
export interface HealthBucket {
  /** Start of the bucket, epoch ms. */
  at: number;
  /** Messages the numbers sent, by platform timestamp. */
  sent: number;
  /** Messages the numbers received. */
  received: number;
  /** Webhook attempts finished (default webhook and every endpoint). */
  attempts: number;
  /** Of those, the ones that failed (no answer, a non-2xx answer, a broker refusal). */
  failed: number;
  /** Median and 99th percentile attempt duration, ms; null without attempts. */
  p50Ms: number | null;
  p99Ms: number | null;
}

/** A session's status changes over the window: its state when the window opened, then each change. */
export interface SessionTimeline {
  instanceId: string;
  changes: { at: number; status: string }[];
}

/** What the dashboard's health charts draw (docs/dashboard.md#health). */
export interface HealthReport {
  range: HealthRange;
  /** Window start and end, epoch ms; buckets are `bucketMs` wide from `since`. */
  since: number;
  until: number;
  bucketMs: number;
  buckets: HealthBucket[];
  /** Window totals: messages, attempts, failures, the failure rate (0 to 1, null without attempts), latency. */
  totals: { sent: number; received: number; attempts: number; failed: number; failureRate: number | null };
  latency: { p50Ms: number | null; p99Ms: number | null };
  sessions: SessionTimeline[];
}

/**
 * The `q` quantile (0 to 1) of sorted `values` by the nearest-rank method (the smallest value with at least `q` of
 * the values at or below it); null for an empty list.
 */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] ?? null;
}

/**
 * Health over time for the dashboard (docs/decisions/0042-dashboard-health.md): sends, received messages, webhook
 * attempts and failures per bucket, attempt latency (p50, p99), and the session status changes, for one instance or
 * the instances of an organization. Read from the store, so any node answers for every instance.
 */
export class HealthService {
  readonly #store: Store;
  readonly #clock: Clock;

  constructor(deps: { store: Store; clock: Clock }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  /** The report of `instanceIds` over `range`, ending now. */
  async report(instanceIds: readonly string[], range: HealthRange): Promise<HealthReport> {
    const { windowMs, bucketMs } = HEALTH_RANGES[range];
    // The window ends at the end of the current bucket, so the last bucket is the one now runs in.
    const until = (Math.floor(this.#clock() / bucketMs) + 1) * bucketMs;
    const since = until - windowMs;
    const db = this.#store.db;
    const [messages, attempts, statuses] = await Promise.all([
      messageBuckets(db, instanceIds, since, until, bucketMs),
      attemptsIn(db, instanceIds, since, until),
      statusChanges(db, instanceIds, since, until),
    ]);
    const count = windowMs / bucketMs;
    const durations: number[][] = Array.from({ length: count }, () => []);
    const buckets: HealthBucket[] = Array.from({ length: count }, (_, i) => ({
      at: since + i * bucketMs,
      sent: 0,
      received: 0,
      attempts: 0,
      failed: 0,
      p50Ms: null,
      p99Ms: null,
    }));
    for (const row of messages) {
      const bucket = buckets[row.bucket];
      if (bucket === undefined) continue;
      bucket.sent = row.sent;
      bucket.received = row.received;
    }
    for (const attempt of attempts) {
      const index = Math.floor((attempt.attemptedAt - since) / bucketMs);
      const bucket = buckets[index];
      if (bucket === undefined) continue;
      bucket.attempts += 1;
      if (attempt.failed) bucket.failed += 1;
      durations[index]?.push(attempt.durationMs);
    }
    for (const [index, list] of durations.entries()) {
      const bucket = buckets[index];
      if (bucket === undefined || list.length === 0) continue;
      list.sort((a, b) => a - b);
      bucket.p50Ms = quantile(list, 0.5);
      bucket.p99Ms = quantile(list, 0.99);
    }
    const all = attempts.map((a) => a.durationMs).sort((a, b) => a - b);
    const failed = attempts.filter((a) => a.failed).length;
    const sessions = instanceIds.map((instanceId) => ({
      instanceId,
      changes: statuses
        .filter((row) => row.instanceId === instanceId)
        .map((row) => ({ at: row.at, status: row.status })),
    }));
    return {
      range,
      since,
      until,
      bucketMs,
      buckets,
      totals: {
        sent: buckets.reduce((sum, b) => sum + b.sent, 0),
        received: buckets.reduce((sum, b) => sum + b.received, 0),
        attempts: attempts.length,
        failed,
        failureRate: attempts.length === 0 ? null : failed / attempts.length,
      },
      latency: { p50Ms: quantile(all, 0.5), p99Ms: quantile(all, 0.99) },
      sessions,
    };
  }
}
