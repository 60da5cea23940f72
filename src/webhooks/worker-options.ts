import type { FastifyBaseLogger } from 'fastify';
import type { BrokerPublishers } from '../brokers/publishers.ts';
import type { Clock } from '../domain/clock.ts';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { Store } from '../store/database.ts';
import type { AttemptOutcome } from '../store/delivery-finish.ts';
import type { TurnTransactions } from '../store/turn-transactions.ts';

/** Options of a {@link DeliveryWorker}. Durations in milliseconds. */
export interface DeliveryWorkerOptions {
  store: Store;
  box: SecretBox;
  /** Every attempt goes through the outbound guard (docs/decisions/0020-security-promises.md). */
  guard: Pick<OutboundGuard, 'request'>;
  /**
   * Publishes to broker endpoints (`amqp(s)://`, `nats://`: docs/decisions/0037-broker-endpoints.md); without it
   * an attempt to a broker endpoint fails.
   */
  brokers?: BrokerPublishers;
  /** The business clock, epoch ms: attempts' times and the log's times (`started_at`, `delivered_at`, …). */
  clock: Clock;
  /**
   * The store's clock, epoch ms, claims are stamped (`locked_at`) and judged stale on, and due times (`run_at`, a
   * retry's) set and judged on: the services pass the node's `StoreClock`, shared by every node
   * (docs/decisions/0008-leases-and-fencing.md, "One clock"), so a node whose wall clock runs ahead takes no
   * delivery still in flight on another (a doubled webhook) nor a retry before its backoff ran out, and one whose
   * clock runs behind still takes back a dead worker's claims and sends a retry when it is due
   * (docs/decisions/0005-outbox-and-delivery.md, "Due times"). Default: `clock` (a worker built alone in a test).
   */
  storeClock?: Clock;
  logger: FastifyBaseLogger;
  /** Retry delays (docs/decisions/0005-outbox-and-delivery.md, `WEBHOOK_RETRY_SCHEDULE`). */
  scheduleMs: readonly number[];
  /** Time allowed for one attempt (docs/decisions/0005-outbox-and-delivery.md: 15 s). */
  timeoutMs: number;
  /** How often to look for due rows when nothing woke the worker (default 1,000). */
  pollIntervalMs?: number;
  /**
   * A claim older than this, on `storeClock`, belongs to a dead worker and is taken over (default 2 × timeout +
   * 30 s).
   */
  staleAfterMs?: number;
  /**
   * Lanes sending at once in this process (`WEBHOOK_CONCURRENCY`, default 64,
   * docs/decisions/0054-delivery-concurrency.md; up to `laneWindow` attempts per lane at a time).
   */
  concurrency?: number;
  /**
   * Deliveries claimed per lane at once (default 32, or four windows when `laneWindow` is above 8), sent in
   * `sequence` order (docs/decisions/0048-lane-batches.md, docs/decisions/0059-lane-record-groups.md); 1 claims
   * one delivery at a time.
   */
  laneBatch?: number;
  /**
   * Requests in flight per lane at once (default `DEFAULT_LANE_WINDOW` of src/config/env.ts, 64; at most 128 and
   * `laneBatch`), started in `sequence` order (docs/decisions/0050-lane-windows.md, `WEBHOOK_LANE_WINDOW`). 1 sends a
   * lane's deliveries one at a time; more lets one busy instance's deliveries keep pace with its events, written
   * pipelined on one connection so they still arrive in `sequence` order (docs/decisions/0058-pipelined-lanes.md,
   * docs/decisions/0089-lane-window-default.md).
   */
  laneWindow?: number;
  /**
   * Requests in flight at once over all lanes (`WEBHOOK_MAX_IN_FLIGHT`, default `DEFAULT_WEBHOOK_MAX_IN_FLIGHT` of
   * src/config/env.ts, 256; docs/decisions/0089-lane-window-default.md): a lane is claimed only with a place for its
   * first request, and its window opens only as far as places are free beyond one kept for each lane it may still
   * claim.
   */
  maxInFlight?: number;
  /**
   * This worker's id in `locked_by` and the attempts log: the services pass the node registry's id, so the
   * registry can release the claims of a dead process (default `<host>:<pid>:<random>`).
   */
  workerId?: string;
  /**
   * The store's shared transaction of each event-loop turn (SQLite, docs/decisions/0051-turn-groups.md): claims and
   * attempt records are written in it with the turn's other writes. Without it each claim and each record has a
   * transaction of its own (one statement for a delivered record on PostgreSQL).
   */
  turn?: TurnTransactions;
  /** Random numbers in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
  /**
   * Called after each attempt is recorded with its outcome, duration in ms and instance id (metrics, the
   * dashboard's live delivery log). Must not throw.
   */
  onAttempt?: (outcome: AttemptOutcome['kind'], durationMs: number, instanceId: string) => void;
}

/**
 * The clock a worker's claims are stamped and judged stale on, and its due times set and judged on: `storeClock`,
 * else `clock` (docs/decisions/0005-outbox-and-delivery.md, "Due times").
 */
export function storeClockOf(options: Pick<DeliveryWorkerOptions, 'clock' | 'storeClock'>): Clock {
  return options.storeClock ?? options.clock;
}

/** The worker options a caller of `createServices` may tune (tests: fast poll, short stale timeout, fixed id). */
export type WebhookWorkerTuning = Pick<
  DeliveryWorkerOptions,
  'pollIntervalMs' | 'staleAfterMs' | 'concurrency' | 'laneBatch' | 'laneWindow' | 'maxInFlight' | 'workerId'
>;
