/** The part of npm `autocannon` (untyped CommonJS, v8) the benchmarks use: one programmatic run. */
declare module 'autocannon' {
  /** Options of one run (subset). Durations in seconds. */
  /** One request of a sequence each connection cycles through (fields override the run's). */
  interface Request {
    method?: 'GET' | 'POST';
    path?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  interface Options {
    /** Target(s); with several, connection i goes to `url[i % url.length]`. */
    url: string | string[];
    method?: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    warmup?: { connections?: number; duration?: number };
    /** Requests each connection sends in turn, starting again after the last. */
    requests?: Request[];
    /** Total requests of the run; when set, `duration` is ignored. */
    amount?: number;
  }
  /** An HDR histogram summary; latency values in ms, request counts per second. */
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    total: number;
  }
  /** The result of one run. */
  interface Result {
    requests: Histogram & { sent: number };
    latency: Histogram & { totalCount: number };
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    statusCodeStats: Record<string, { count: number }>;
  }
  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
