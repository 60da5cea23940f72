import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import type { PasswordVerifier } from './app/dashboard-auth.ts';
import type { IdempotencyPurge } from './app/idempotency.ts';
import type { Application } from './app/index.ts';
import type { KeyAuthenticator } from './auth/authenticator.ts';
import { type Config, readCertificateFile } from './config/config.ts';
import type { RegistrationCache } from './contacts/registration-cache.ts';
import type { Clock } from './domain/clock.ts';
import type { BaileysEngineOptions } from './engines/baileys/index.ts';
import type { Engine } from './engines/engine.ts';
import { EventCommits } from './events/event-commits.ts';
import { LiveFeed } from './events/live-feed.ts';
import type { EventRecorder } from './events/recorder.ts';
import type { MediaRetention } from './media/retention.ts';
import type { OutboundGuard } from './net/outbound-guard.ts';
import type { LeaseKeeper } from './nodes/leases.ts';
import type { NodeRegistry } from './nodes/registry.ts';
import { StoreClock } from './nodes/store-clock.ts';
import { Metrics } from './ops/metrics.ts';
import type { PlanRateLimiter } from './ratelimit/limiter.ts';
import type { SecretBox } from './security/secrets.ts';
import type { SendQueue } from './sends/queue.ts';
import type { SessionManager } from './sessions/manager.ts';
import type { Store } from './store/database.ts';
import type { PgSignalsTiming, StoreSignals } from './store/pg-signals.ts';
import { TurnTransactions } from './store/turn-transactions.ts';
import type { LogRetention } from './webhooks/retention.ts';
import type { DeliveryWorker, WebhookWorkerTuning } from './webhooks/worker.ts';
import { wireAccess } from './wiring/access.ts';
import { wireApplication } from './wiring/app.ts';
import { wireMaintenance } from './wiring/maintenance.ts';
import { stopServing, wireCluster, wireNodeRegistry } from './wiring/nodes.ts';
import { wireSendQueue } from './wiring/sends.ts';
import { wireSessions } from './wiring/sessions.ts';
import { wireSignals, wireStore } from './wiring/store.ts';
import { wireWebhooks } from './wiring/webhooks.ts';

/**
 * Everything the process runs, built once at boot by the factories of src/wiring: the application services
 * (`app`, src/app) and the parts below them (store, sessions, recorder, webhook worker, …) that the entry points and
 * tests use. It is also the `HttpServices` (src/app/http-services.ts) the HTTP layer is built with, which sees only
 * `app` and a few process-wide things. `close` releases them in reverse order.
 */
export interface Services {
  config: Config;
  store: Store;
  box: SecretBox;
  clock: Clock;
  /**
   * This node's one estimate of the store's clock (docs/decisions/0008-leases-and-fencing.md, "One clock"): the
   * registry's heartbeats, the lease keeper's expiries, the one-socket locks' expiries and the webhook claims' stale
   * timeout are all written and judged on it, never on this node's wall clock; the registry and the keeper read the
   * store's time into it every round.
   */
  storeClock: StoreClock;
  logger: FastifyBaseLogger;
  keys: KeyAuthenticator;
  limiter: PlanRateLimiter;
  recorder: EventRecorder;
  /** This node's commits of instance events, which wake the event streams (docs/decisions/0031-event-stream.md). */
  commits: EventCommits;
  /**
   * Signals between the nodes of a PostgreSQL store (docs/decisions/0078-store-signals.md): other nodes' commits, key
   * revocations and delivery attempts heard at once; undefined on SQLite and behind a pooler in transaction mode.
   */
  signals: StoreSignals | undefined;
  /**
   * This node's committed instance changes and finished delivery attempts, for the dashboard's live views
   * (docs/decisions/0022-dashboard.md).
   */
  feed: LiveFeed;
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
   * leases, the secret of node-to-node calls and how long a view spanning nodes waits for each node's answer, ms
   * (`askTimeoutMs`). The entry point starts the keeper once listening (`keeper.start(url)`) and drains it first on a
   * graceful stop.
   */
  cluster: { keeper: LeaseKeeper; secret: string; askTimeoutMs: number } | undefined;
  /**
   * The webhook delivery worker (docs/decisions/0005-outbox-and-delivery.md); started here, stopped first by `close`.
   */
  webhooks: DeliveryWorker;
  /** The send queue of the instances this process holds (sends as jobs, pacing). */
  sendQueue: SendQueue;
  /**
   * Prunes finished events older than both `WEBHOOK_RETENTION_DAYS` and `EVENT_RETENTION_DAYS` (delivery log and
   * event log, docs/decisions/0030-event-log.md) and finished send jobs, hourly.
   */
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
  /**
   * The node's store clock (default: a {@link StoreClock} over the store); tests pass one whose reading of the
   * store's time they control.
   */
  storeClock?: StoreClock;
  /**
   * The clock the send queue's due times are set and judged on (default: the node's store clock's `now`,
   * docs/decisions/0112-send-due-times-on-the-store-clock.md). Tests on a manual business clock pass it, so the
   * scheduled sends and retries of one node come due as that clock moves.
   */
  sendDueClock?: Clock;
  /**
   * The clock `Idempotency-Key` claims' locks and expiries are set and judged on (default: the node's store clock's
   * `now`: a claim's lock is compared by every node, docs/decisions/0010-idempotency.md). Tests on a manual business
   * clock pass it, so one node's claims lapse and expire as that clock moves.
   */
  idempotencyClock?: Clock;
  /** The live engine; defaults to Baileys (docs/decisions/0024-engines-and-data-flow.md). Tests pass fakes. */
  liveEngine?: Engine;
  /**
   * Timing of the default live engine (tests shorten the keep-alive, the refusal bound and the ack wait, fix the
   * jitter, and answer the platform version refresh after a 405 themselves, as slowly as they need).
   */
  liveEngineTuning?: Pick<
    BaileysEngineOptions,
    'keepAliveIntervalMs' | 'loginRefusalLimit' | 'random' | 'fetchVersion' | 'ackTimeoutMs'
  >;
  /** How often to look for revocations from other processes, ms (default 1000). */
  revocationPollMs?: number;
  /** How often an idle event stream reads the log anyway, ms (default 1000; tests lengthen it). */
  streamPollMs?: number;
  /** Timing of the store signals' connection (PostgreSQL; tests shorten its checks). */
  signals?: Partial<PgSignalsTiming>;
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
 * Builds the services from the per-subsystem factories of src/wiring, in dependency order: files the settings name
 * (read first, so a bad path fails the start before anything opens), the store, secrets and Redis; keys and limits;
 * the node registry; engines, sessions and the recorder; the cluster's leases; webhooks; the registry started (dead
 * nodes' claims released) before the worker claims anything; the clean-ups; the send queue; the application services.
 * @throws ConfigError when a configured file is unreadable or the store cannot be opened or migrated; when the
 *   master key file is unreadable; `NodeIdInUseError` (a ConfigError) when a live process uses this node's id
 *   (docs/decisions/0008-leases-and-fencing.md, "Node identity").
 */
export async function createServices(config: Config, options: ServiceOptions): Promise<Services> {
  const clock = options.clock ?? Date.now;
  const logger = options.logger;
  const ca =
    options.outboundCa ??
    (config.outboundCaFile ? readCertificateFile('OUTBOUND_CA_FILE', config.outboundCaFile) : undefined);
  const platformCa = config.platform.caFile
    ? readCertificateFile('PLATFORM_CA_FILE', config.platform.caFile)
    : undefined;
  const storage = await wireStore(config, { logger, store: options.store });
  const { store, box, redis } = storage;
  // One clock for everything this node compares with other nodes' times, read from the store by the registry and the
  // lease keeper (docs/decisions/0008-leases-and-fencing.md, "One clock").
  const storeClock = options.storeClock ?? new StoreClock({ db: store.db, logger });
  const storeNow: Clock = () => storeClock.now();
  const access = wireAccess(config, {
    store,
    redis,
    clock,
    logger,
    revocationPollMs: options.revocationPollMs,
  });
  const { keys, limiter } = access;
  const { start = true, workerId, ...workerTuning } = options.webhookWorker ?? {};
  // The webhook worker is woken once the registry released dead nodes' claims; it exists by then (the registry
  // starts below, after the worker is built).
  let wakeWebhooks: () => void = () => undefined;
  // Set once the sessions and the cluster exist (below, before the registry starts).
  let displaced: () => void = () => undefined;
  const nodes = wireNodeRegistry(config, {
    store,
    storeClock,
    logger,
    workerId,
    cluster: options.cluster,
    nodeRegistry: options.nodeRegistry,
    onReleased: () => wakeWebhooks(),
    onDisplaced: () => displaced(),
  });
  // On SQLite, whose one connection runs transactions one after the other, the recorder's batches and the
  // worker's attempt records of a turn share one transaction (docs/decisions/0051-turn-groups.md).
  const turn = store.dialect === 'sqlite' ? new TurnTransactions(store.db) : undefined;
  const engines = wireSessions(config, {
    store,
    turn,
    box,
    clock,
    storeClock: storeNow,
    logger,
    nodeId: nodes.id,
    platformCa,
    liveEngine: options.liveEngine,
    liveEngineTuning: options.liveEngineTuning,
    restoreRetry: options.restoreRetry,
  });
  const { recorder, sessions, live, copies, held } = engines;
  const cluster = wireCluster(config, {
    store,
    storeClock,
    nodes,
    sessions,
    logger,
    timing: options.cluster,
  });
  // Another process took this node's id over: it serves the same leases, so this one stops serving
  // (docs/decisions/0008-leases-and-fencing.md, "Node identity").
  displaced = () => void stopServing({ sessions, keeper: cluster?.keeper, logger });
  const metrics = new Metrics();
  metrics.trackBacklog(sessions.backlog);
  metrics.trackSessions(sessions);
  if (store.pool) metrics.trackPool(store.pool);
  // Committed instance changes for the dashboard's live views (docs/decisions/0022-dashboard.md).
  const feed = new LiveFeed();
  recorder.use(feed);
  // Committed events wake the event streams of their instance (docs/decisions/0031-event-stream.md).
  const commits = new EventCommits();
  recorder.use(commits);
  // Other nodes' commits, key revocations and delivery attempts heard at once, on PostgreSQL
  // (docs/decisions/0078-store-signals.md).
  const signals = await wireSignals(config, { store, nodeId: nodes.id, logger, timing: options.signals });
  if (signals) {
    commits.connect(signals);
    keys.listen(signals);
    // An attempt for an instance whose session is elsewhere is told to the node serving its live views.
    feed.connect(signals, (instanceId) => sessions.existing(instanceId) === undefined);
  }
  const delivery = wireWebhooks(config, {
    store,
    box,
    clock,
    storeClock: storeNow,
    logger,
    recorder,
    copies,
    held,
    metrics,
    feed,
    nodeId: nodes.id,
    turn,
    ca,
    tuning: workerTuning,
  });
  const { guard, webhooks, brokers } = delivery;
  wakeWebhooks = () => webhooks.wake();
  // Registered (and dead nodes' claims released) before the worker claims anything. A registry that cannot
  // register (the store gone in that instant) fails the start with what is open so far closed: nothing else has
  // started yet, and an open store or Redis connection would keep a failed process from exiting.
  try {
    await nodes.start();
  } catch (error) {
    await nodes.stop().catch(() => undefined);
    keys.stop();
    await signals?.close();
    await limiter.close().catch(() => undefined);
    await guard.close().catch(() => undefined);
    redis?.disconnect();
    if (!options.store) await store.destroy().catch(() => undefined);
    throw error;
  }
  if (start) webhooks.start();
  const idempotencyClock = options.idempotencyClock ?? storeNow;
  const maintenance = wireMaintenance(config, { store, clock, idempotencyClock, logger, start });
  const { retention, mediaRetention, idempotencyPurge } = maintenance;
  const sendQueue = wireSendQueue({
    store,
    sessions,
    recorder,
    nodeId: nodes.id,
    clock,
    // The store clock's estimate never answers less than before for a sync's small correction, so a send accepted
    // after another is never due before it (docs/decisions/0112-send-due-times-on-the-store-clock.md).
    storeClock: options.sendDueClock ?? storeNow,
    logger,
    start,
  });
  const { app, registrations } = wireApplication(config, {
    storage,
    access,
    sessions: engines,
    webhooks: delivery,
    maintenance,
    sendQueue,
    feed,
    commits,
    signals,
    streamPollMs: options.streamPollMs,
    clock,
    idempotencyClock,
    logger,
    verifyPassword: options.verifyPassword,
    // Not ready while draining: a load balancer stops sending before the node stops listening
    // (docs/decisions/0008-leases-and-fencing.md).
    registered: () => nodes.registered && !cluster?.keeper.draining,
  });
  return {
    config,
    store,
    box,
    clock,
    storeClock,
    logger,
    keys,
    limiter,
    recorder,
    commits,
    signals,
    feed,
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
      await signals?.close();
      await limiter.close();
      await sessions.closeAll();
      await live.close?.();
      await brokers.close();
      await guard.close();
      if (redis) await redis.quit().catch(() => redis.disconnect());
      if (!closeOptions?.keepStore) await store.destroy();
    },
  };
}
