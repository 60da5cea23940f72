import type { FastifyBaseLogger } from 'fastify';
import { BrokerPublishers } from '../brokers/publishers.ts';
import type { Config } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import type { HeldReceipts } from '../events/held-receipts.ts';
import type { LiveFeed } from '../events/live-feed.ts';
import type { MessageCopies } from '../events/message-copies.ts';
import { OutboxProjection } from '../events/outbox-projection.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { OutboundGuard } from '../net/outbound-guard.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { Store } from '../store/database.ts';
import type { TurnTransactions } from '../store/turn-transactions.ts';
import { DeliveryWorker, type WebhookWorkerTuning } from '../webhooks/worker.ts';

/** Outbound HTTPS and webhook delivery. */
export interface WebhookParts {
  /** Every outbound HTTPS request (webhooks, media) goes through this (docs/decisions/0020-security-promises.md). */
  guard: OutboundGuard;
  /** The delivery worker (docs/decisions/0005-outbox-and-delivery.md), not started. */
  webhooks: DeliveryWorker;
  /** The broker endpoints' connections (docs/decisions/0037-broker-endpoints.md); closed after the worker stops. */
  brokers: BrokerPublishers;
}

/**
 * Builds the outbound guard (`WEBHOOK_ALLOWED_CIDRS`, plus the extra CA `ca` when given), the broker publishers
 * behind it and the delivery worker
 * (claims under node id `nodeId` on the node's store clock `storeClock`, each attempt counted in `metrics` and told
 * to the dashboard's `feed`), and adds
 * the outbox projection to `recorder`: every recorded event gets its webhook row and, when subscribed, a delivery
 * that wakes the worker after the commit (docs/decisions/0005-outbox-and-delivery.md), but for a copy of a message
 * recorded before (`copies`, src/events/message-copies.ts). Received media are linked at
 * `PUBLIC_URL/v1/messages/:id/media` (docs/api.md#messages).
 */
export function wireWebhooks(
  config: Config,
  deps: {
    store: Store;
    box: SecretBox;
    clock: Clock;
    /**
     * The node's store clock, epoch ms: claims are stamped and judged stale, and due times set and judged, on it (the
     * worker's `storeClock`).
     */
    storeClock: Clock;
    logger: FastifyBaseLogger;
    recorder: EventRecorder;
    /** What tells the copies of recorded messages (src/events/message-copies.ts): they make no webhook event. */
    copies?: MessageCopies | undefined;
    /** The receipts held for sends not recorded yet (src/events/held-receipts.ts): reported after their send. */
    held?: HeldReceipts | undefined;
    metrics: Metrics;
    feed: LiveFeed;
    nodeId: string;
    /** The store's shared transaction of each event-loop turn (SQLite only): claims and attempt records join it. */
    turn?: TurnTransactions | undefined;
    ca?: string | Buffer | undefined;
    tuning?: Omit<WebhookWorkerTuning, 'workerId'> | undefined;
  },
): WebhookParts {
  const { store, box, clock, logger, recorder, metrics, feed } = deps;
  const guard = new OutboundGuard({
    allowedCidrs: config.webhook.allowedCidrs,
    ...(deps.ca === undefined ? {} : { ca: deps.ca }),
  });
  const brokers = new BrokerPublishers({ guard });
  const webhooks = new DeliveryWorker({
    store,
    box,
    guard,
    brokers,
    clock,
    storeClock: deps.storeClock,
    logger,
    scheduleMs: config.webhook.retryScheduleMs,
    timeoutMs: config.webhook.timeoutMs,
    laneWindow: config.webhook.laneWindow,
    maxInFlight: config.webhook.maxInFlight,
    concurrency: config.webhook.concurrency,
    ...(deps.turn === undefined ? {} : { turn: deps.turn }),
    ...(config.webhook.claimStaleMs === undefined ? {} : { staleAfterMs: config.webhook.claimStaleMs }),
    onAttempt: (outcome, durationMs, instanceId) => {
      metrics.webhookAttempts.inc({ outcome });
      metrics.webhookAttemptDuration.observe(durationMs / 1000);
      feed.attempted(instanceId);
    },
    ...deps.tuning,
    workerId: deps.nodeId,
  });
  metrics.trackWebhooks(webhooks);
  recorder.use(
    new OutboxProjection({
      clock,
      dueClock: () => webhooks.dueNow(),
      maxAttempts: webhooks.maxAttempts,
      ...(deps.copies === undefined ? {} : { copies: deps.copies }),
      ...(deps.held === undefined ? {} : { held: deps.held }),
      onCommitted: (instanceId, endpointIds) => webhooks.wake(instanceId, endpointIds),
      // An id decoded from a protobuf may hold a lone surrogate, which encodeURIComponent refuses (failing the
      // recording): the link has U+FFFD in its place.
      mediaUrl: (instanceId, messageId) =>
        `${config.publicUrl}/v1/messages/${encodeURIComponent(messageId.toWellFormed())}/media?from=${instanceId}`,
    }),
  );
  return { guard, webhooks, brokers };
}
