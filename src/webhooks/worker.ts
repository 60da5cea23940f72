import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { BrokerError } from '../brokers/errors.ts';
import type { BrokerPublishers } from '../brokers/publishers.ts';
import { brokerSubject, isBrokerUrl, parseBrokerUrl } from '../brokers/urls.ts';
import type { Clock } from '../domain/clock.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound-guard.ts';
import type { SecretBox } from '../security/secrets.ts';
import { nowIso, type Store } from '../store/database.ts';
import {
  type AttemptOutcome,
  type AttemptRecord,
  finishAttempt,
  releaseClaims,
} from '../store/deliveries.ts';
import { type ClaimedDelivery, claimDeliveries } from '../store/delivery-claims.ts';
import { isStoreUnavailableError } from '../store/faults.ts';
import { RetryPolicy } from './backoff.ts';
import { webhookHeaders } from './signing.ts';

/**
 * Bytes of a receiver's response body kept in the attempts log (docs/decisions/0005-outbox-and-delivery.md: first 2
 * KB).
 */
export const RESPONSE_LOG_BYTES = 2048;

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
  clock: Clock;
  logger: FastifyBaseLogger;
  /** Retry delays (docs/decisions/0005-outbox-and-delivery.md, `WEBHOOK_RETRY_SCHEDULE`). */
  scheduleMs: readonly number[];
  /** Time allowed for one attempt (docs/decisions/0005-outbox-and-delivery.md: 15 s). */
  timeoutMs: number;
  /** How often to look for due rows when nothing woke the worker (default 1,000). */
  pollIntervalMs?: number;
  /** A claim older than this belongs to a dead worker and is taken over (default 2 × timeout + 30 s). */
  staleAfterMs?: number;
  /** Attempts in flight at once in this process (default 8; one per instance at a time). */
  concurrency?: number;
  /**
   * This worker's id in `locked_by` and the attempts log: the services pass the node registry's id, so the
   * registry can release the claims of a dead process (default `<host>:<pid>:<random>`).
   */
  workerId?: string;
  /** Random numbers in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
  /**
   * Called after each attempt is recorded with its outcome, duration in ms and instance id (metrics, the
   * dashboard's live delivery log). Must not throw.
   */
  onAttempt?: (outcome: AttemptOutcome['kind'], durationMs: number, instanceId: string) => void;
}

/** The worker options a caller of `createServices` may tune (tests: fast poll, short stale timeout, fixed id). */
export type WebhookWorkerTuning = Pick<
  DeliveryWorkerOptions,
  'pollIntervalMs' | 'staleAfterMs' | 'concurrency' | 'workerId'
>;

/**
 * Delivers queued webhook events (docs/decisions/0005-outbox-and-delivery.md). Claims due rows from the store
 * (several processes can share the queue on PostgreSQL), posts each through the outbound guard with the headers and
 * signatures of docs/decisions/0006-signatures.md, records the attempt and schedules the next one in the row. It
 * keeps no retry state in memory: a process killed at any instant loses nothing: its claims are released by the node
 * registry as soon as the process is known dead (`src/nodes/registry.ts`: at the next boot on the same host, or once
 * its heartbeat lapses), and taken over once stale in any case. A poll timer plus {@link wake} (called when
 * an event was queued or an attempt finished) drive it.
 */
export class DeliveryWorker {
  /** Value of `locked_by` for this worker's claims. */
  readonly id: string;
  readonly #options: DeliveryWorkerOptions;
  readonly #pollMs: number;
  readonly #staleMs: number;
  readonly #concurrency: number;
  readonly #retry: RetryPolicy;
  readonly #inFlight = new Map<string, Promise<void>>();
  /**
   * Attempts in flight per lane (`<instanceId>/<endpointId>`, docs/decisions/0035-webhook-endpoints.md) in this
   * process (at most one by the claim rule; counted to be safe).
   */
  readonly #busyLanes = new Map<string, number>();
  #running = false;
  #loop: Promise<void> | undefined;
  #wakeRequested = false;
  #sleeper: (() => void) | undefined;

  constructor(options: DeliveryWorkerOptions) {
    this.#options = options;
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#pollMs = options.pollIntervalMs ?? 1000;
    this.#staleMs = options.staleAfterMs ?? 2 * options.timeoutMs + 30_000;
    this.#concurrency = Math.max(1, options.concurrency ?? 8);
    this.#retry = new RetryPolicy(options.scheduleMs, options.random);
  }

  /** Attempts a delivery gets per round with the configured schedule. */
  get maxAttempts(): number {
    return this.#retry.maxAttempts;
  }

  /** Epoch ms before which a claim counts as stale at time `now`. */
  staleBefore(now: number): number {
    return now - this.#staleMs;
  }

  /** Number of attempts this process has in flight. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Starts claiming. Idempotent. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /**
   * Asks the worker to look for due rows now instead of at the next poll. Never throws. With `instanceId` (events of
   * that instance were queued to the lanes of `endpointIds`, `''` the default webhook; default just that one),
   * nothing happens while this process has an attempt in flight on every one of those lanes: their new deliveries
   * cannot be claimed before those attempts end (docs/decisions/0005-outbox-and-delivery.md order), and each end
   * wakes the worker anyway. This keeps a busy lane's every commit from running a claim query that cannot succeed,
   * while a delivery to an idle endpoint of a busy instance is claimed at once.
   */
  wake(instanceId?: string, endpointIds: readonly string[] = ['']): void {
    if (
      instanceId !== undefined &&
      endpointIds.length > 0 &&
      endpointIds.every((endpointId) => this.#busyLanes.has(`${instanceId}/${endpointId}`))
    )
      return;
    this.#wakeRequested = true;
    const sleeper = this.#sleeper;
    this.#sleeper = undefined;
    sleeper?.();
  }

  /**
   * Stops claiming, then lets attempts in flight finish for up to `graceMs`; claims still held after that are
   * released so another process (or the next start) retries them at once instead of after the stale timeout
   * (docs/decisions/0023-operations.md: shutdown within its budget). An attempt that finishes later does not change
   * its row.
   */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.wake();
    await this.#loop;
    const pending = [...this.#inFlight.values()];
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    const result = await Promise.race([Promise.allSettled(pending).then(() => 'done' as const), timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      const keys = [...this.#inFlight.keys()].map((key) => {
        const [eventId = '', endpointId = ''] = key.split('/');
        return { eventId, endpointId };
      });
      await releaseClaims(this.#options.store.db, this.id, keys).catch((error: unknown) =>
        this.#options.logger.warn({ err: error }, 'releasing webhook claims at shutdown failed'),
      );
    }
  }

  /**
   * Claims one batch of due deliveries and waits for their attempts (tests and the loop).
   * @returns how many deliveries were attempted.
   */
  async runOnce(): Promise<number> {
    const started = this.#claimAndLaunch();
    const batch = await started;
    await Promise.allSettled(batch);
    return batch.length;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#wakeRequested = false;
      await this.#claimAndLaunch();
      if (!this.#running) break;
      if (this.#wakeRequested) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.#sleeper = undefined;
          resolve();
        }, this.#pollMs);
        this.#sleeper = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Claims up to the free capacity and starts the attempts; returns their promises. */
  async #claimAndLaunch(): Promise<Promise<void>[]> {
    const free = this.#concurrency - this.#inFlight.size;
    if (free <= 0) return [];
    const { store, clock, logger } = this.#options;
    const now = clock();
    let claimed: ClaimedDelivery[];
    try {
      claimed = await claimDeliveries(store.db, store.dialect, {
        workerId: this.id,
        now,
        staleBefore: this.staleBefore(now),
        limit: free,
      });
    } catch (error) {
      logger.warn({ err: error }, 'claiming webhook deliveries failed');
      return [];
    }
    return claimed.map((delivery) => {
      // A delivery is an event to one endpoint (docs/decisions/0035-webhook-endpoints.md).
      const key = `${delivery.eventId}/${delivery.endpointId}`;
      const lane = `${delivery.instanceId}/${delivery.endpointId}`;
      this.#busyLanes.set(lane, (this.#busyLanes.get(lane) ?? 0) + 1);
      const attempt = this.#attempt(delivery)
        .catch((error: unknown) => {
          logger.warn({ err: error, eventId: delivery.eventId }, 'recording a webhook attempt failed');
        })
        .finally(() => {
          this.#inFlight.delete(key);
          const left = (this.#busyLanes.get(lane) ?? 1) - 1;
          if (left > 0) this.#busyLanes.set(lane, left);
          else this.#busyLanes.delete(lane);
          if (this.#running) this.wake();
        });
      this.#inFlight.set(key, attempt);
      return attempt;
    });
  }

  /**
   * The `error` of a failed attempt as the tenant reads it in the delivery log: only the guard's caller-safe
   * text (docs/decisions/0020-security-promises.md: no resolved address, address class or resolver code; a host
   * resolving to a refused address reads the same as one that does not resolve), or `attempt failed: internal error`.
   * The details go to the server log with the event id.
   */
  #attemptError(delivery: ClaimedDelivery, error: unknown): string {
    const { logger } = this.#options;
    const context = { err: error, eventId: delivery.eventId, instanceId: delivery.instanceId };
    if (error instanceof OutboundError) {
      logger.info({ ...context, reason: error.reason }, 'webhook attempt failed');
      return error.publicMessage;
    }
    if (error instanceof BrokerError) {
      logger.info(context, 'broker publish failed');
      return error.message;
    }
    logger.warn(context, 'webhook attempt failed before a response');
    return 'attempt failed: internal error';
  }

  /**
   * Records an attempt's outcome, waiting out a store that cannot be reached (docs/decisions/0011-store-faults.md)
   * for up to half the stale timeout: an attempt the receiver took is recorded as soon as the store answers,
   * instead of its claim holding the instance's later deliveries until it goes stale and the event is sent again.
   * Waits double from 100 ms to at most 5 s.
   * @throws the store's error when it is not an unreachable store, or once half the stale timeout has passed.
   */
  async #finish(work: () => Promise<boolean>): Promise<boolean> {
    const { clock } = this.#options;
    const giveUpAt = clock() + this.#staleMs / 2;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (!isStoreUnavailableError(error) || clock() >= giveUpAt) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** (attempt - 1))));
      }
    }
  }

  /** One attempt: sign, post through the guard, record, schedule. */
  async #attempt(delivery: ClaimedDelivery): Promise<void> {
    const { box, clock } = this.#options;
    const startedAt = clock();
    const started = performance.now();
    const record: AttemptRecord = {
      statusCode: null,
      durationMs: 0,
      error: null,
      responseBody: null,
      responseTruncated: false,
    };
    let retryAfter: string | undefined;
    let gone = false;
    try {
      const hmacKey = delivery.hmacKeySealed === null ? null : box.open(delivery.hmacKeySealed);
      const endpointSecret =
        delivery.endpointSecretSealed === null ? null : box.open(delivery.endpointSecretSealed);
      const timestampSeconds = Math.floor(startedAt / 1000);
      const headers = webhookHeaders({
        id: delivery.eventId,
        timestampSeconds,
        body: delivery.payload,
        hmacKey,
        ...(endpointSecret === null ? {} : { endpointSecret }),
      });
      const url = delivery.urlSealed === null ? delivery.url : box.open(delivery.urlSealed);
      if (isBrokerUrl(url)) {
        record.responseBody = await this.#publish(url, delivery, headers, timestampSeconds);
        record.durationMs = Math.round(performance.now() - started);
      } else {
        ({ retryAfter, gone } = await this.#post(delivery, headers, record));
      }
    } catch (error) {
      record.durationMs = Math.round(performance.now() - started);
      record.error = this.#attemptError(delivery, error);
    }
    await this.#record(delivery, record, retryAfter, gone);
  }

  /**
   * Posts a delivery to its HTTPS receiver through the outbound guard and fills `record` from the response
   * (docs/decisions/0005-outbox-and-delivery.md: 2xx delivered, 410 Gone disables, 3xx not followed).
   * @returns the response's `retry-after` and whether it was a 410.
   * @throws OutboundError when no response came.
   */
  async #post(
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    record: AttemptRecord,
  ): Promise<{ retryAfter: string | undefined; gone: boolean }> {
    const { guard, timeoutMs } = this.#options;
    let gone = false;
    const response = await guard.request(delivery.url, {
      method: 'POST',
      headers,
      body: delivery.payload,
      timeoutMs,
      maxResponseBytes: RESPONSE_LOG_BYTES,
      onTooLarge: 'truncate',
    });
    record.statusCode = response.status;
    record.durationMs = response.durationMs;
    record.responseBody = response.body.toString('utf8').replaceAll('\u0000', '\uFFFD');
    record.responseTruncated = response.truncated;
    if (response.status === 410) {
      gone = true;
      record.error =
        delivery.endpointId === ''
          ? 'receiver answered 410 Gone: webhook disabled'
          : 'receiver answered 410 Gone: endpoint disabled';
    } else if (response.status >= 300 && response.status < 400) {
      record.error = `receiver answered ${response.status}: redirects are not followed`;
    } else if (response.status < 200 || response.status >= 300) {
      record.error = `receiver answered ${response.status}`;
    }
    return { retryAfter: response.headers['retry-after'], gone };
  }

  /**
   * Publishes a delivery to its broker endpoint (docs/decisions/0037-broker-endpoints.md): the exact body, routing
   * key or subject `parley.<instanceId>.<Type>`, the event id as message id, the Standard Webhooks headers.
   * @returns the broker's receipt, kept as the attempt's response text.
   * @throws BrokerError, OutboundError (the broker host refused), Error (no publishers configured).
   */
  async #publish(
    url: string,
    delivery: ClaimedDelivery,
    headers: Record<string, string>,
    timestampSeconds: number,
  ): Promise<string> {
    const { brokers, timeoutMs } = this.#options;
    if (brokers === undefined) throw new Error('this worker has no broker publishers');
    const { target } = parseBrokerUrl(url);
    const parsed: unknown = JSON.parse(delivery.payload);
    const type =
      typeof parsed === 'object' && parsed !== null && 'type' in parsed && typeof parsed.type === 'string'
        ? parsed.type
        : 'Event';
    const { 'user-agent': _agent, ...messageHeaders } = headers;
    return brokers.publish(
      target,
      {
        id: delivery.eventId,
        subject: brokerSubject(delivery.instanceId, type),
        type,
        body: delivery.payload,
        headers: messageHeaders,
        timestampSeconds,
      },
      timeoutMs,
    );
  }

  /** Records an attempt's result and schedules what follows (next attempt, failure, or a 410's disabling). */
  async #record(
    delivery: ClaimedDelivery,
    record: AttemptRecord,
    retryAfter: string | undefined,
    gone: boolean,
  ): Promise<void> {
    const { clock } = this.#options;
    let outcome: AttemptOutcome;
    if (record.error === null) outcome = { kind: 'delivered' };
    else if (gone) outcome = { kind: 'gone', reason: 'receiver answered 410 Gone' };
    else {
      // `attempts` was counted when this attempt was claimed: it is this attempt's number in the round.
      const runAt = this.#retry.nextRunAt({
        attemptsMade: delivery.attempts,
        maxAttempts: delivery.maxAttempts,
        now: clock(),
        retryAfter,
      });
      outcome = runAt === null ? { kind: 'failed' } : { kind: 'retry', runAt };
    }
    const applied = await this.#finish(() =>
      finishAttempt(this.#options.store.db, {
        eventId: delivery.eventId,
        endpointId: delivery.endpointId,
        instanceId: delivery.instanceId,
        attemptId: delivery.attemptId,
        workerId: this.id,
        lockedAt: delivery.lockedAt,
        attempt: record,
        outcome,
        now: nowIso(clock),
      }),
    );
    this.#options.onAttempt?.(outcome.kind, record.durationMs, delivery.instanceId);
    if (!applied) {
      this.#options.logger.info(
        { eventId: delivery.eventId },
        'webhook claim was taken over before the attempt finished; its outcome was only logged',
      );
    }
  }
}
