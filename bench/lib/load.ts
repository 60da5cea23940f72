import autocannon from 'autocannon';
import { round } from './stats.ts';

/** One HTTP load run against a server over loopback (autocannon, in the runner process). */
export interface LoadOptions {
  /**
   * Target URL, or several (e.g. one per cluster node): connection i then goes to `url[i % url.length]`, so the
   * load is spread round-robin when `connections` is a multiple of their number.
   */
  url: string | string[];
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** JSON body (POST). */
  body?: unknown;
  /**
   * Paths every connection requests in turn (same method, headers and body), e.g. one per instance; the URL's
   * own path when absent.
   */
  paths?: string[];
  connections: number;
  /** Measured seconds (ignored when `amount` is set). */
  durationS: number;
  /** When set, the run ends after this many requests instead of after `durationS`. */
  amount?: number;
  /** Unmeasured seconds before, same connections (JIT, caches, SQLite pages). */
  warmupS: number;
}

/** What one load run measured. Latencies in ms (autocannon's whole-millisecond HDR histogram). */
export interface LoadResult {
  requestsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  completed: number;
  durationS: number;
  errors: number;
  timeouts: number;
  non2xx: number;
}

/**
 * Runs autocannon with `options` and summarises it. Requests per second = completed requests / measured
 * seconds. A run with errors or non-2xx answers is returned as is; the caller reports them.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const result = await autocannon({
    url: options.url,
    method: options.method,
    headers: {
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    ...(options.paths === undefined ? {} : { requests: options.paths.map((path) => ({ path })) }),
    ...(options.amount === undefined ? {} : { amount: options.amount }),
    connections: options.connections,
    duration: options.durationS,
    timeout: 10,
    ...(options.warmupS > 0
      ? { warmup: { connections: options.connections, duration: options.warmupS } }
      : {}),
  });
  const completed = result.requests.total;
  return {
    requestsPerSecond: round(completed / result.duration, 0),
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
      mean: round(result.latency.mean, 2),
    },
    completed,
    durationS: round(result.duration, 2),
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
  };
}
