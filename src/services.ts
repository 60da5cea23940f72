import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import type { PasswordVerifier } from './app/dashboard-auth.ts';
import { IdempotencyPurge } from './app/idempotency.ts';
import { type Application, createApplication } from './app/index.ts';
import { KeyAuthenticator } from './auth/authenticator.ts';
import { type Config, ConfigError, readCertificateFile } from './config/config.ts';
import { RegistrationCache } from './contacts/registration-cache.ts';
import type { Clock } from './domain/clock.ts';
import type { EngineMessage } from './domain/messages.ts';
import { BaileysEngine, type BaileysEngineOptions } from './engines/baileys/index.ts';
import type { Engine } from './engines/engine.ts';
import { SandboxEngine } from './engines/sandbox/index.ts';
import { InstanceStateProjection } from './events/instance-state.ts';
import { LiveFeed } from './events/live-feed.ts';
import { MessageProjection } from './events/message-projection.ts';
import { OutboxProjection } from './events/outbox-projection.ts';
import { EventRecorder } from './events/recorder.ts';
import { MediaRetention } from './media/retention.ts';
import { MediaStore } from './media/store.ts';
import { OutboundGuard } from './net/outbound-guard.ts';
import { LEASE_HEARTBEAT_MS, LEASE_TTL_MS, LeaseKeeper } from './nodes/leases.ts';
import { NodeRegistry } from './nodes/registry.ts';
import { Metrics } from './ops/metrics.ts';
import { PlanRateLimiter } from './ratelimit/limiter.ts';
import { PersistedWindows } from './ratelimit/persisted-window.ts';
import { SignInLimiter } from './ratelimit/sign-in.ts';
import { loadMasterKey, SecretBox } from './security/secrets.ts';
import { SendQueue } from './sends/queue.ts';
import { recordSendStatus } from './sends/status-events.ts';
import { SqlSessionLocks } from './sessions/instance-lock.ts';
import { SessionManager } from './sessions/manager.ts';
import { readCallSettings } from './store/call-settings.ts';
import { migrateToLatest, openStore, type Store, storeFailure } from './store/database.ts';
import { RedisReplayMemory, SqlReplayMemory } from './store/gateway-replay.ts';
import { findStoredMessage } from './store/messages.ts';
import { LogRetention } from './webhooks/retention.ts';
import { DeliveryWorker, type WebhookWorkerTuning } from './webhooks/worker.ts';

/**
 * Everything the process runs, built once at boot: the application services routes call (`app`, src/app) and
 * the parts below them (store, sessions, recorder, webhook worker, …) that the HTTP plugins and the CLI use.
 * `close` releases them in reverse order.
 */
export interface Services {
  config: Config;
  store: Store;
  box: SecretBox;
  clock: Clock;
  logger: FastifyBaseLogger;
  keys: KeyAuthenticator;
  limiter: PlanRateLimiter;
  recorder: EventRecorder;
  sessions: SessionManager;
  metrics: Metrics;
  redis: Redis | undefined;
  /** Every outbound HTTPS request (webhooks, media) goes through this (docs/decisions/0020-security-promises.md). */
  guard: OutboundGuard;
  /**
   * Recipients' registration answers, cached per instance (docs/decisions/0001-envelope-and-error-codes.md: sends
   * check registration first).
   */
  registrations: RegistrationCache;
  /**
   * This process in the node registry: its id (also the webhook claims' `locked_by`) and heartbeat; at boot it
   * releases the claims of dead nodes, a killed predecessor's included.
   */
  nodes: NodeRegistry;
  /**
   * Several nodes (docs/decisions/0008-leases-and-fencing.md), when `CLUSTER_SECRET` is set: this node's instance
   * leases and the secret of node-to-node calls. The entry point starts the keeper once listening
   * (`keeper.start(url)`) and drains it first on a graceful stop.
   */
  cluster: { keeper: LeaseKeeper; secret: string } | undefined;
  /**
   * The webhook delivery worker (docs/decisions/0005-outbox-and-delivery.md); started here, stopped first by `close`.
   */
  webhooks: DeliveryWorker;
  /** The send queue of the instances this process holds (sends as jobs, pacing). */
  sendQueue: SendQueue;
  /** Prunes finished events older than `WEBHOOK_RETENTION_DAYS` from the delivery log, hourly. */
  retention: LogRetention;
  /** Prunes downloaded media files older than `MEDIA_RETENTION_DAYS` from the local media store, hourly. */
  mediaRetention: MediaRetention;
  /** Deletes `Idempotency-Key` rows past their 24 h, hourly (docs/decisions/0010-idempotency.md). */
  idempotencyPurge: IdempotencyPurge;
  /** The application services the routes call, one per family (src/app). */
  app: Application;
  /**
   * Stops everything in reverse order of creation. `keepStore` leaves the store open (a test restarting the
   * service on the same database closes the old services this way).
   */
  close(options?: { keepStore?: boolean }): Promise<void>;
}

/** Options for {@link createServices}; tests pass an already open store, a clock or engines of their own. */
export interface ServiceOptions {
  logger: FastifyBaseLogger;
  store?: Store;
  clock?: Clock;
  /** The live engine; defaults to Baileys (docs/decisions/0024-engines-and-data-flow.md). Tests pass fakes. */
  liveEngine?: Engine;
  /** Timing of the default live engine (tests shorten the keep-alive and the refusal bound). */
  liveEngineTuning?: Pick<BaileysEngineOptions, 'keepAliveIntervalMs' | 'loginRefusalLimit' | 'random'>;
  /** How often to look for revocations from other processes, ms (default 1000). */
  revocationPollMs?: number;
  /** Extra CA (PEM) the outbound guard trusts; tests pass the HTTPS receiver's self-signed certificate. */
  outboundCa?: string | Buffer;
  /** Backoff of boot restores that found the platform unreachable, ms (tests shorten it). */
  restoreRetry?: { baseMs: number; maxMs: number };
  /**
   * Webhook worker tuning (tests: fast poll, short stale timeout, fixed id); `start: false` leaves it stopped
   * (tests then drive it with `runOnce`).
   */
  webhookWorker?: WebhookWorkerTuning & { start?: boolean };
  /** Node registry timing, ms (tests shorten it): heartbeat interval and the age at which a node is dead. */
  nodeRegistry?: { heartbeatMs?: number; deadAfterMs?: number };
  /** How dashboard passwords are checked (tests count the Argon2id checks); default Argon2id. */
  verifyPassword?: PasswordVerifier;
  /** Lease timing of a cluster node, ms (tests shorten it): renewal period and lease lifetime. */
  cluster?: { heartbeatMs?: number; ttlMs?: number };
}

/**
 * Opens and migrates the store the configuration names.
 * @throws ConfigError with one line naming the store (password masked) and the setting that fixes it.
 */
async function openOwnStore(config: Config, logger: FastifyBaseLogger): Promise<Store> {
  let store: Store | undefined;
  try {
    store = await openStore(config.database, {
      onConnectionError: (error) => logger.warn({ err: error }, 'a store connection failed'),
    });
    await migrateToLatest(store);
    return store;
  } catch (error) {
    await store?.destroy().catch(() => undefined);
    throw new ConfigError(storeFailure(config.database, error));
  }
}

/**
 * Opens the store (migrating it), the master key, Redis when configured, and builds the services.
 * @throws when the store cannot be opened or migrated, or the master key file is unreadable.
 */
export async function createServices(config: Config, options: ServiceOptions): Promise<Services> {
  const clock = options.clock ?? Date.now;
  const logger = options.logger;
  // Files the settings name are read before anything starts, so a bad path fails the start cleanly.
  const ca =
    options.outboundCa ??
    (config.outboundCaFile ? readCertificateFile('OUTBOUND_CA_FILE', config.outboundCaFile) : undefined);
  const platformCa = config.platform.caFile
    ? readCertificateFile('PLATFORM_CA_FILE', config.platform.caFile)
    : undefined;
  const store = options.store ?? (await openOwnStore(config, logger));
  if (options.store) await migrateToLatest(options.store);
  const box = new SecretBox(loadMasterKey(config.dataDir, config.secretKey));
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 })
    : undefined;
  redis?.on('error', (error: Error) => logger.warn({ err: error }, 'redis error'));
  const keys = new KeyAuthenticator(store.db, {
    ttlMs: config.authCacheTtlMs,
    revocationPollMs: options.revocationPollMs ?? 1000,
    touchEveryMs: 60_000,
    clock,
    logger,
  });
  keys.start();
  // Without Redis the day window is kept in the store across restarts (docs/decisions/0019-rate-limits-and-plans.md).
  const limiter = new PlanRateLimiter(redis, undefined, {
    ...(redis ? {} : { persisted: new PersistedWindows({ db: store.db, logger }) }),
  });
  const recorder = new EventRecorder(
    store.db,
    [new InstanceStateProjection(clock), new MessageProjection(clock)],
    logger,
  );
  const sandbox = new SandboxEngine();
  const { start: startWebhooks = true, workerId, ...workerTuning } = options.webhookWorker ?? {};
  // The webhook worker is woken once the registry released dead nodes' claims; it exists by then (the
  // registry starts below, after the worker is built).
  let wakeWebhooks: () => void = () => undefined;
  const nodeId = config.cluster?.nodeId ?? workerId;
  const nodes = new NodeRegistry({
    db: store.db,
    logger,
    ...(nodeId === undefined ? {} : { id: nodeId }),
    // A cluster node's liveness follows its lease timing: a dead node's webhook claims go with its leases.
    ...(config.cluster
      ? {
          heartbeatMs: options.cluster?.heartbeatMs ?? LEASE_HEARTBEAT_MS,
          deadAfterMs: options.cluster?.ttlMs ?? LEASE_TTL_MS,
        }
      : {}),
    ...options.nodeRegistry,
    onReleased: () => wakeWebhooks(),
  });
  const live: Engine =
    options.liveEngine ??
    new BaileysEngine({
      locks: new SqlSessionLocks({ db: store.db, owner: nodes.id }),
      logger,
      clock,
      platform: {
        url: config.platform.url,
        rootKey: config.platform.rootKey,
        ...(platformCa ? { ca: platformCa } : {}),
      },
      ...options.liveEngineTuning,
    });
  const findMessage = async (instanceId: string, id: string): Promise<EngineMessage | undefined> => {
    const stored = await findStoredMessage(store.db, instanceId, id);
    if (!stored) return undefined;
    const { state: _state, stateAt: _stateAt, ...message } = stored;
    return message;
  };
  const sessions = new SessionManager({
    db: store.db,
    box,
    engines: { test: sandbox, live },
    recorder,
    findMessage,
    callSettings: (instanceId) => readCallSettings(store.db, instanceId),
    logger,
    clock,
    ...(options.restoreRetry ? { restoreRetry: options.restoreRetry } : {}),
  });
  const cluster = config.cluster
    ? {
        secret: config.cluster.secret,
        keeper: new LeaseKeeper({ db: store.db, nodeId: nodes.id, sessions, logger, ...options.cluster }),
      }
    : undefined;
  const metrics = new Metrics();
  metrics.trackBacklog(sessions.backlog);
  metrics.trackSessions(sessions);
  // Committed instance changes for the dashboard's live views (docs/decisions/0022-dashboard.md).
  const feed = new LiveFeed();
  recorder.use(feed);
  const guard = new OutboundGuard({
    allowedCidrs: config.webhook.allowedCidrs,
    ...(ca === undefined ? {} : { ca }),
  });
  const webhooks = new DeliveryWorker({
    store,
    box,
    guard,
    clock,
    logger,
    scheduleMs: config.webhook.retryScheduleMs,
    timeoutMs: config.webhook.timeoutMs,
    ...(config.webhook.claimStaleMs === undefined ? {} : { staleAfterMs: config.webhook.claimStaleMs }),
    onAttempt: (outcome, durationMs, instanceId) => {
      metrics.webhookAttempts.inc({ outcome });
      metrics.webhookAttemptDuration.observe(durationMs / 1000);
      feed.attempted(instanceId);
    },
    ...workerTuning,
    workerId: nodes.id,
  });
  wakeWebhooks = () => webhooks.wake();
  recorder.use(
    new OutboxProjection({
      clock,
      maxAttempts: webhooks.maxAttempts,
      onCommitted: (instanceId) => webhooks.wake(instanceId),
      mediaUrl: (instanceId, messageId) =>
        `${config.publicUrl}/v1/messages/${encodeURIComponent(messageId)}/media?from=${instanceId}`,
    }),
  );
  // Registered (and dead nodes' claims released) before the worker claims anything.
  await nodes.start();
  if (startWebhooks) webhooks.start();
  const retention = new LogRetention({
    db: store.db,
    clock,
    logger,
    retentionMs: config.webhook.retentionMs,
  });
  if (startWebhooks) retention.start();
  const mediaFiles = new MediaStore({ dir: config.media.dir, clock });
  const mediaRetention = new MediaRetention({
    files: mediaFiles,
    clock,
    logger,
    retentionMs: config.media.retentionMs,
  });
  if (startWebhooks) mediaRetention.start();
  const idempotencyPurge = new IdempotencyPurge({ store, clock, logger });
  if (startWebhooks) idempotencyPurge.start();
  const registrations = new RegistrationCache({ clock });
  const sendQueue = new SendQueue({
    db: store.db,
    session: (instanceId) => sessions.existing(instanceId),
    nodeId: nodes.id,
    clock,
    logger,
    report: (instanceId, report) => recordSendStatus(recorder, instanceId, report),
  });
  recorder.use(sendQueue);
  if (startWebhooks) sendQueue.start();
  const app = createApplication({
    sendQueue,
    store,
    box,
    clock,
    logger,
    sessions,
    recorder,
    registrations,
    guard,
    webhookWorker: webhooks,
    keys,
    limiter,
    replay: redis ? new RedisReplayMemory(redis, clock) : new SqlReplayMemory(store.db, clock),
    signInLimiter: new SignInLimiter(redis, { clock }),
    ...(options.verifyPassword ? { verifyPassword: options.verifyPassword } : {}),
    feed,
    webhookTimeoutMs: config.webhook.timeoutMs,
    media: { files: mediaFiles, maxBytes: config.media.maxBytes },
    // Not ready while draining: a load balancer stops sending before the node stops listening
    // (docs/decisions/0008-leases-and-fencing.md).
    registered: () => nodes.registered && !cluster?.keeper.draining,
  });
  return {
    config,
    store,
    box,
    clock,
    logger,
    keys,
    limiter,
    recorder,
    sessions,
    metrics,
    redis,
    guard,
    nodes,
    cluster,
    webhooks,
    retention,
    mediaRetention,
    idempotencyPurge,
    registrations,
    app,
    sendQueue,
    async close(closeOptions) {
      await sendQueue.stop(config.shutdownTimeoutMs / 2);
      await Promise.all([
        webhooks.stop(config.shutdownTimeoutMs / 2),
        retention.stop(),
        mediaRetention.stop(),
        idempotencyPurge.stop(),
      ]);
      app.idempotency.close();
      await cluster?.keeper.stop();
      await nodes.stop();
      keys.stop();
      await limiter.close();
      await sessions.closeAll();
      await live.close?.();
      await guard.close();
      if (redis) await redis.quit().catch(() => redis.disconnect());
      if (!closeOptions?.keepStore) await store.destroy();
    },
  };
}
