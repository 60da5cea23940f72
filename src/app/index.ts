import type { FastifyBaseLogger } from 'fastify';
import type { KeyAuthenticator } from '../auth/authenticator.ts';
import type { RegistrationCache } from '../contacts/registration-cache.ts';
import type { Clock } from '../domain/clock.ts';
import type { Instance } from '../domain/instance.ts';
import type { EventCommits } from '../events/event-commits.ts';
import type { LiveFeed } from '../events/live-feed.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { MediaStore } from '../media/store.ts';
import type { OutboundGuard } from '../net/outbound-guard.ts';
import type { PlanRateLimiter } from '../ratelimit/limiter.ts';
import type { SignInLimiter } from '../ratelimit/sign-in.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { SendQueue } from '../sends/queue.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import type { ReplayMemory } from '../store/gateway-replay.ts';
import type { StoreSignals } from '../store/pg-signals.ts';
import type { DeliveryWorker } from '../webhooks/worker.ts';
import { AccessService } from './access.ts';
import { CallService } from './calls.ts';
import { ChannelService } from './channels.ts';
import { ChatActionService } from './chat-actions.ts';
import { ChatService } from './chats.ts';
import { ContactService } from './contacts.ts';
import { DashboardAdminService } from './dashboard-admin.ts';
import type { PasswordVerifier } from './dashboard-auth.ts';
import { DashboardAuthService } from './dashboard-auth.ts';
import { EventStreamService } from './event-stream.ts';
import { EventLogService } from './events.ts';
import { ForwardService } from './forward.ts';
import { GatewayService } from './gateway.ts';
import { GroupService } from './groups.ts';
import { HealthService } from './health.ts';
import { IdempotencyService } from './idempotency.ts';
import { InstanceService } from './instances.ts';
import { LabelService } from './labels.ts';
import { MediaService } from './media.ts';
import { MessageUpdateService } from './message-updates.ts';
import { MessagingService } from './messaging.ts';
import { PacingService } from './pacing.ts';
import { ProfileService } from './profile.ts';
import { ReadinessService } from './readiness.ts';
import { SandboxService } from './sandbox.ts';
import { SessionService } from './sessions.ts';
import { StatusService } from './status.ts';
import { WebhookEndpointService } from './webhook-endpoints.ts';
import { WebhookTestService } from './webhook-test.ts';
import { WebhookService } from './webhooks.ts';

/**
 * The application layer: one service per family, each owning its transactions and its calls into engines,
 * store and recorder. Routes (and any other caller: a dashboard action, the CLI, a test) resolve the instance once
 * (`instances.resolve` for a request, `instances.load` by id) and call one method: every instance-scoped method takes
 * that {@link Instance} first, so one request reads its instance once. A request for an instance another node holds
 * is forwarded whole and resolved again there (docs/decisions/0008-leases-and-fencing.md).
 */
export interface Application {
  /** API keys and plan limits of each request (docs/decisions/0003-scopes-and-keys.md). */
  access: AccessService;
  /**
   * Which instance a request addresses (docs/decisions/0002-instance-resolution.md), and the instances family
   * (`/v1/instances`, docs/decisions/0029-instances-over-the-api.md).
   */
  instances: InstanceService;
  /** The gateway form's instance and signature memory (docs/decisions/0021-gateway-form.md). */
  gateway: GatewayService;
  session: SessionService;
  messaging: MessagingService;
  /** Received media files: downloaded from the platform on demand, kept in the local media store. */
  media: MediaService;
  /** Edits, deletions for everyone and chat presence (docs/decisions/0026-chats-edits-polls-and-calls.md). */
  messageUpdates: MessageUpdateService;
  /** Forwards of stored messages (docs/decisions/0041-forward-calls-channels.md). */
  forward: ForwardService;
  contacts: ContactService;
  groups: GroupService;
  webhooks: WebhookService;
  /** Extra webhook endpoints (docs/decisions/0035-webhook-endpoints.md). */
  webhookEndpoints: WebhookEndpointService;
  /** Every recorded event of an instance, read in sequence order (docs/decisions/0030-event-log.md). */
  eventLog: EventLogService;
  /** Live streams of an instance's events, tails of the event log (docs/decisions/0031-event-stream.md). */
  eventStream: EventStreamService;
  sandbox: SandboxService;
  readiness: ReadinessService;
  /** Chats and stored history (docs/decisions/0026-chats-edits-polls-and-calls.md). */
  chats: ChatService;
  /** Per-instance call handling (docs/decisions/0026-chats-edits-polls-and-calls.md). */
  calls: CallService;
  /** Channels (newsletters) the instance follows (docs/decisions/0041-forward-calls-channels.md). */
  channels: ChannelService;
  /** Per-instance send pace and the queue's restriction pause. */
  pacing: PacingService;
  /** Dashboard users, sign-in and sessions (docs/decisions/0022-dashboard.md). */
  dashboardAuth: DashboardAuthService;
  /**
   * The dashboard's organization-scoped admin operations: instances, keys, usage, live changes
   * (docs/decisions/0022-dashboard.md).
   */
  dashboard: DashboardAdminService;
  /** "Send a test event" to an instance's webhook URL (docs/decisions/0022-dashboard.md). */
  webhookTest: WebhookTestService;
  /** The dashboard's health charts (docs/decisions/0042-dashboard-health.md). */
  health: HealthService;
  /** `Idempotency-Key` claims and kept answers (docs/decisions/0010-idempotency.md). */
  idempotency: IdempotencyService;
  /** The account's profile, privacy settings and blocklist (docs/decisions/0039-profile-privacy-blocklist.md). */
  profile: ProfileService;
  /** Chat actions and starring (docs/decisions/0043-chat-actions-and-star.md). */
  chatActions: ChatActionService;
  /** Who sees a status update (docs/decisions/0044-status-stories.md). */
  status: StatusService;
  /** Business labels (docs/decisions/0045-business-labels.md). */
  labels: LabelService;
}

/** What the application services are built from (see src/services.ts). */
export interface ApplicationDeps {
  store: Store;
  box: SecretBox;
  clock: Clock;
  /**
   * The clock `Idempotency-Key` claims' locks and expiries are set and judged on: the node's store clock, since every
   * node compares them (docs/decisions/0010-idempotency.md); omitted: `clock`.
   */
  idempotencyClock?: Clock;
  logger: FastifyBaseLogger;
  sessions: SessionManager;
  recorder: EventRecorder;
  registrations: RegistrationCache;
  guard: OutboundGuard;
  webhookWorker: DeliveryWorker;
  /** The send queue of the instances this process holds (sends as jobs, pacing). */
  sendQueue: SendQueue;
  keys: KeyAuthenticator;
  limiter: PlanRateLimiter;
  /** Gateway signatures already used (Redis when configured, else the store). */
  replay: ReplayMemory;
  signInLimiter: SignInLimiter;
  /** How dashboard passwords are checked (Argon2id unless a test counts the checks). */
  verifyPassword?: PasswordVerifier;
  feed: LiveFeed;
  /** This node's commits of instance events: what wakes the event streams (docs/decisions/0031-event-stream.md). */
  commits: EventCommits;
  /**
   * The store's signals between nodes (PostgreSQL, docs/decisions/0078-store-signals.md); with them the instance
   * lists are kept between turns (docs/decisions/0088-kept-instance-lists.md).
   */
  signals?: StoreSignals | undefined;
  /** How often an idle event stream reads the log anyway, ms (default `STREAM_POLL_MS`; tests lengthen it). */
  streamPollMs?: number | undefined;
  /** Time allowed for one webhook POST, ms (docs/decisions/0005-outbox-and-delivery.md: 15 s). */
  webhookTimeoutMs: number;
  /** The local store of downloaded media files, and the largest file downloaded (bytes, `MEDIA_MAX_MB`). */
  media: { files: MediaStore; maxBytes: number };
  /**
   * Whether this node is registered with a recent heartbeat (readiness, docs/decisions/0008-leases-and-fencing.md);
   * omitted: always.
   */
  registered?: () => boolean;
}

/** Builds the application services over the process's shared parts. */
export function createApplication(deps: ApplicationDeps): Application {
  const { store, box, clock, sessions, recorder, registrations, guard, webhookWorker } = deps;
  const { keys, limiter, signInLimiter, feed, webhookTimeoutMs, media, logger } = deps;
  const eventLog = new EventLogService({ store });
  const webhooks = new WebhookService({ store, guard, worker: webhookWorker, clock });
  const mediaService = new MediaService({ store, sessions, files: media.files, maxBytes: media.maxBytes });
  return {
    access: new AccessService({ keys, limiter }),
    instances: new InstanceService({ store, sessions, files: media.files, signals: deps.signals }),
    gateway: new GatewayService({ store, box, replay: deps.replay }),
    session: new SessionService({ store, sessions, box }),
    messaging: new MessagingService({
      store,
      sessions,
      registrations,
      recorder,
      queue: deps.sendQueue,
      clock,
    }),
    media: mediaService,
    messageUpdates: new MessageUpdateService({ store, sessions, clock, registrations }),
    forward: new ForwardService({ store, media: mediaService }),
    contacts: new ContactService({ store, sessions, registrations }),
    groups: new GroupService({ sessions }),
    webhooks,
    webhookEndpoints: new WebhookEndpointService({
      store,
      box,
      guard,
      worker: webhookWorker,
      webhooks,
      clock,
    }),
    eventLog,
    eventStream: new EventStreamService({
      eventLog,
      commits: deps.commits,
      ...(deps.streamPollMs === undefined ? {} : { pollMs: deps.streamPollMs }),
    }),
    sandbox: new SandboxService({ store, sessions, registrations }),
    readiness: new ReadinessService({ store, ...(deps.registered ? { registered: deps.registered } : {}) }),
    chats: new ChatService({ store }),
    pacing: new PacingService({ queue: deps.sendQueue }),
    calls: new CallService({ store, clock, sessions }),
    channels: new ChannelService({ sessions }),
    dashboardAuth: new DashboardAuthService({
      store,
      clock,
      limiter: signInLimiter,
      ...(deps.verifyPassword ? { verifyPassword: deps.verifyPassword } : {}),
    }),
    dashboard: new DashboardAdminService({ store, sessions, limiter, keys, feed, clock }),
    webhookTest: new WebhookTestService({ box, guard, clock, timeoutMs: webhookTimeoutMs }),
    health: new HealthService({ store, clock }),
    idempotency: new IdempotencyService({ store, clock: deps.idempotencyClock ?? clock, logger }),
    profile: new ProfileService({ sessions }),
    chatActions: new ChatActionService({ sessions, store, clock }),
    status: new StatusService({ store }),
    labels: new LabelService({ sessions, store }),
  };
}
