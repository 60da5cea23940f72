import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { PoolUsage } from '../store/database.ts';

/**
 * Prometheus metrics of one service (docs/decisions/0023-operations.md), on a registry of its own so several apps in
 * one process (tests) do not collide. Served at `GET /metrics`.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'parley_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'parley_http_request_duration_seconds',
    help: 'HTTP request duration in seconds, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'parley_rate_limited_total',
    help: 'Requests refused with 429, by window',
    labelNames: ['window'] as const,
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'parley_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (delivered, retry, failed, gone)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly webhookAttemptDuration = new Histogram({
    name: 'parley_webhook_attempt_duration_seconds',
    help: 'Duration of webhook delivery attempts in seconds',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
    registers: [this.registry],
  });
  /** What the sessions gauge reads at scrape time (see {@link trackSessions}). */
  #sessions: { readonly size: number } | undefined;
  readonly sessions: Gauge = new Gauge({
    name: 'parley_sessions',
    help: 'Engine sessions held by this process',
    registers: [this.registry],
    collect: () => {
      if (this.#sessions) this.sessions.set(this.#sessions.size);
    },
  });

  /** What the backlog gauges read at scrape time (see {@link trackBacklog}). */
  #backlog: { readonly count: number; readonly oldestAgeMs: number } | undefined;
  readonly inboundBacklog: Gauge = new Gauge({
    name: 'parley_inbound_backlog',
    help: 'Events of this process waiting to be recorded (queued behind a store that cannot be reached)',
    registers: [this.registry],
    collect: () => {
      this.inboundBacklog.set(this.#backlog?.count ?? 0);
    },
  });
  readonly inboundBacklogOldest: Gauge = new Gauge({
    name: 'parley_inbound_backlog_oldest_seconds',
    help: 'Age of the oldest event of this process waiting to be recorded, seconds (0 when none waits)',
    registers: [this.registry],
    collect: () => {
      this.inboundBacklogOldest.set((this.#backlog?.oldestAgeMs ?? 0) / 1000);
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'parley_' });
  }

  /**
   * Reads the backlog gauges from `source` at every scrape (docs/deploy.md, What a database restart does):
   * `count` events, the oldest waiting `oldestAgeMs` ms (served in seconds).
   */
  trackBacklog(source: { readonly count: number; readonly oldestAgeMs: number }): void {
    this.#backlog = source;
  }

  /**
   * Registers the pool gauges, read from `pool` at every scrape (docs/decisions/0080-pool-size.md):
   * `parley_db_pool_max_connections`, `parley_db_pool_connections` by state (`busy`: held by a statement or a
   * transaction; `idle`) and `parley_db_pool_waiting` (callers waiting for a connection). Called once, on
   * PostgreSQL; a SQLite store has no pool, and its registry has no such gauges.
   */
  trackPool(pool: PoolUsage): void {
    const registers = [this.registry];
    new Gauge({
      name: 'parley_db_pool_max_connections',
      help: "PostgreSQL: most connections of this process's pool (DATABASE_POOL_SIZE)",
      registers,
      collect() {
        this.set(pool.max);
      },
    });
    new Gauge({
      name: 'parley_db_pool_connections',
      help: "PostgreSQL: connections of this process's pool open now, by state (busy: held by a statement or a transaction; idle)",
      labelNames: ['state'] as const,
      registers,
      collect() {
        const { total, idle } = pool;
        this.set({ state: 'busy' }, total - idle);
        this.set({ state: 'idle' }, idle);
      },
    });
    new Gauge({
      name: 'parley_db_pool_waiting',
      help: 'PostgreSQL: statements and transactions of this process waiting for a connection of its pool',
      registers,
      collect() {
        this.set(pool.waiting);
      },
    });
  }

  /**
   * Registers the webhook worker's gauges, read from `worker` at every scrape
   * (docs/decisions/0089-lane-window-default.md): `parley_webhook_lanes_in_flight` (lanes sending now, at most
   * `WEBHOOK_CONCURRENCY`), `parley_webhook_requests_in_flight` (requests in flight over those lanes) and
   * `parley_webhook_max_in_flight` (their bound, `WEBHOOK_MAX_IN_FLIGHT`). Called once.
   */
  trackWebhooks(worker: {
    readonly inFlight: number;
    readonly requestsInFlight: number;
    readonly maxInFlight: number;
  }): void {
    const registers = [this.registry];
    new Gauge({
      name: 'parley_webhook_lanes_in_flight',
      help: "Webhook lanes (an instance's webhook URL or one of its endpoints) this process is sending on now",
      registers,
      collect() {
        this.set(worker.inFlight);
      },
    });
    new Gauge({
      name: 'parley_webhook_requests_in_flight',
      help: 'Webhook requests of this process in flight now over all its lanes (a place each, kept while its record starts the next)',
      registers,
      collect() {
        this.set(worker.requestsInFlight);
      },
    });
    new Gauge({
      name: 'parley_webhook_max_in_flight',
      help: 'Most webhook requests this process has in flight at once (WEBHOOK_MAX_IN_FLIGHT)',
      registers,
      collect() {
        this.set(worker.maxInFlight);
      },
    });
  }

  /** Reads the sessions gauge from `source.size` (the engine sessions this process holds) at every scrape. */
  trackSessions(source: { readonly size: number }): void {
    this.#sessions = source;
  }
}
