import type { FastifyBaseLogger } from 'fastify';
import type { PasswordVerifier } from '../app/dashboard-auth.ts';
import { type Application, createApplication } from '../app/index.ts';
import type { Config } from '../config/config.ts';
import { RegistrationCache } from '../contacts/registration-cache.ts';
import type { Clock } from '../domain/clock.ts';
import type { EventCommits } from '../events/event-commits.ts';
import type { LiveFeed } from '../events/live-feed.ts';
import type { SendQueue } from '../sends/queue.ts';
import { RedisReplayMemory, SqlReplayMemory } from '../store/gateway-replay.ts';
import type { StoreSignals } from '../store/pg-signals.ts';
import type { AccessParts } from './access.ts';
import type { MaintenanceParts } from './maintenance.ts';
import type { SessionParts } from './sessions.ts';
import type { StoreParts } from './store.ts';
import type { WebhookParts } from './webhooks.ts';

/**
 * The application services (src/app) over the parts built before them, and the registration cache they share. Gateway
 * signatures are remembered in Redis when configured, else in the store (docs/decisions/0021-gateway-form.md).
 * `registered` says whether this node may be sent traffic (readiness, docs/decisions/0008-leases-and-fencing.md).
 */
export function wireApplication(
  config: Config,
  parts: {
    storage: StoreParts;
    access: AccessParts;
    sessions: SessionParts;
    webhooks: WebhookParts;
    maintenance: MaintenanceParts;
    sendQueue: SendQueue;
    feed: LiveFeed;
    commits: EventCommits;
    /** The store's signals (PostgreSQL), which keep the instance lists between turns. */
    signals?: StoreSignals | undefined;
    streamPollMs?: number | undefined;
    clock: Clock;
    /** The clock `Idempotency-Key` claims are set and judged on (the node's store clock, see src/services.ts). */
    idempotencyClock: Clock;
    logger: FastifyBaseLogger;
    registered: () => boolean;
    verifyPassword?: PasswordVerifier | undefined;
  },
): { app: Application; registrations: RegistrationCache } {
  const { store, box, redis } = parts.storage;
  const { clock } = parts;
  const registrations = new RegistrationCache({ clock });
  const app = createApplication({
    sendQueue: parts.sendQueue,
    store,
    box,
    clock,
    idempotencyClock: parts.idempotencyClock,
    logger: parts.logger,
    sessions: parts.sessions.sessions,
    recorder: parts.sessions.recorder,
    registrations,
    guard: parts.webhooks.guard,
    webhookWorker: parts.webhooks.webhooks,
    keys: parts.access.keys,
    limiter: parts.access.limiter,
    replay: redis ? new RedisReplayMemory(redis, clock) : new SqlReplayMemory(store.db, clock),
    signInLimiter: parts.access.signInLimiter,
    ...(parts.verifyPassword ? { verifyPassword: parts.verifyPassword } : {}),
    feed: parts.feed,
    commits: parts.commits,
    signals: parts.signals,
    streamPollMs: parts.streamPollMs,
    webhookTimeoutMs: config.webhook.timeoutMs,
    media: { files: parts.maintenance.mediaFiles, maxBytes: config.media.maxBytes },
    registered: parts.registered,
  });
  return { app, registrations };
}
