import { type Static, Type } from '@sinclair/typebox';

/**
 * The environment variables parley reads (their names, types, defaults and rules), for src/config/config.ts to
 * parse into a `Config`; the README's "Configuration" section lists them for operators.
 */

/**
 * Webhook lanes a process sends on at once when `WEBHOOK_CONCURRENCY` is not set
 * (docs/decisions/0054-delivery-concurrency.md): a lane is an instance's default webhook or one of its endpoints,
 * so this is how many instances' receivers are waited on at once.
 */
export const DEFAULT_WEBHOOK_CONCURRENCY = 64;

/**
 * Webhook requests of one lane in flight at once when `WEBHOOK_LANE_WINDOW` is not set
 * (docs/decisions/0089-lane-window-default.md): a lane with one event due sends it alone; a busy number's backlog is
 * written up to this many deep, pipelined on one connection, so it arrives in `sequence` order and keeps pace.
 */
export const DEFAULT_LANE_WINDOW = 64;

/**
 * Webhook requests a process has in flight at once, over all its lanes, when `WEBHOOK_MAX_IN_FLIGHT` is not set
 * (docs/decisions/0089-lane-window-default.md): a first request for each of the default 64 lanes, and 192 places
 * for the windows of busy lanes (three full windows), shared fairly among the lanes of each claim
 * (docs/decisions/0090-window-places-shared.md).
 */
export const DEFAULT_WEBHOOK_MAX_IN_FLIGHT = 256;

/**
 * Most webhook requests of one lane in flight at once (`WEBHOOK_LANE_WINDOW`): a busy number's window written
 * pipelined on one connection (docs/decisions/0058-pipelined-lanes.md, docs/decisions/0059-lane-record-groups.md).
 */
export const MAX_LANE_WINDOW = 128;

/**
 * The environment variables parley reads, with their defaults. Only `loadConfig` (src/config/config.ts) reads them,
 * from the environment its caller hands it (docs/decisions/0024-engines-and-data-flow.md): everything else receives
 * the parsed `Config`.
 */
export const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: 'HTTP port' }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0', description: 'address to listen on' }),
  DATA_DIR: Type.String({ minLength: 1, default: './data', description: 'SQLite file and key file folder' }),
  DATABASE_URL: Type.Optional(
    Type.String({
      pattern: '^(postgres|postgresql|sqlite|file):',
      description: 'postgres://… or sqlite:PATH',
    }),
  ),
  DATABASE_PREPARED_STATEMENTS: Type.Union([Type.Literal('on'), Type.Literal('off')], {
    default: 'on',
    description:
      'PostgreSQL: statements with parameters as named prepared statements (docs/decisions/0055-named-statements.md)',
  }),
  DATABASE_ANSWER_TIMEOUT_SECONDS: Type.Number({
    minimum: 0,
    maximum: 3600,
    default: 30,
    description:
      'PostgreSQL: how long a connection with statements waiting may stay silent before it is closed; 0 never (docs/decisions/0011-store-faults.md)',
  }),
  DATABASE_POOL_SIZE: Type.Integer({
    minimum: 1,
    maximum: 1000,
    default: 10,
    description:
      'PostgreSQL: most connections a process holds in its pool, besides its signals connection (docs/decisions/0080-pool-size.md)',
  }),
  REDIS_URL: Type.Optional(
    Type.String({ pattern: '^rediss?://', description: 'redis://… for shared limits' }),
  ),
  SECRET_KEY: Type.Optional(
    Type.String({
      pattern: '^([0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$',
      description: '32-byte master key, hex or base64',
    }),
  ),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  PUBLIC_URL: Type.Optional(
    Type.String({ pattern: '^https?://', description: 'base URL shown in examples' }),
  ),
  INVITE_BASE_URL: Type.String({ pattern: '^https://', default: 'https://chat.whatsapp.com/' }),
  AUTH_CACHE_TTL_SECONDS: Type.Integer({ minimum: 0, maximum: 3600, default: 30 }),
  WEBHOOK_RETRY_SCHEDULE: Type.String({
    pattern: '^\\d+(\\.\\d+)?(,\\d+(\\.\\d+)?)*$',
    default: '5,300,1800,7200,18000,36000,36000',
  }),
  WEBHOOK_ALLOWED_CIDRS: Type.String({ default: '' }),
  WEBHOOK_CLAIM_STALE_SECONDS: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 86400 })),
  WEBHOOK_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
  WEBHOOK_LANE_WINDOW: Type.Integer({
    minimum: 1,
    maximum: MAX_LANE_WINDOW,
    default: DEFAULT_LANE_WINDOW,
    description:
      'webhook requests in flight per lane, started in sequence order and pipelined on one connection (docs/decisions/0050-lane-windows.md, docs/decisions/0058-pipelined-lanes.md, docs/decisions/0089-lane-window-default.md)',
  }),
  WEBHOOK_MAX_IN_FLIGHT: Type.Integer({
    minimum: 1,
    maximum: 65_536,
    default: DEFAULT_WEBHOOK_MAX_IN_FLIGHT,
    description:
      'webhook requests in flight at once in this process, over all lanes (docs/decisions/0089-lane-window-default.md)',
  }),
  WEBHOOK_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 256,
    default: DEFAULT_WEBHOOK_CONCURRENCY,
    description:
      'webhook lanes sending at once in this process (docs/decisions/0054-delivery-concurrency.md)',
  }),
  EVENT_RETENTION_DAYS: Type.Integer({
    minimum: 1,
    maximum: 3650,
    default: 7,
    description: 'least age, days, at which an event leaves the event log (docs/decisions/0030-event-log.md)',
  }),
  MEDIA_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
  MEDIA_MAX_MB: Type.Integer({ minimum: 1, maximum: 2048, default: 100 }),
  OUTBOUND_CA_FILE: Type.Optional(
    Type.String({ minLength: 1, description: 'PEM file of extra CAs trusted for webhook and media HTTPS' }),
  ),
  WEBHOOK_TIMEOUT_SECONDS: Type.Number({ exclusiveMinimum: 0, maximum: 300, default: 15 }),
  FFMPEG_PATH: Type.Optional(
    Type.String({ minLength: 1, description: 'ffmpeg binary for animated stickers' }),
  ),
  SHUTDOWN_TIMEOUT_SECONDS: Type.Number({ exclusiveMinimum: 0, maximum: 300, default: 10 }),
  CLUSTER_SECRET: Type.Optional(
    Type.String({ minLength: 32, description: 'shared secret authenticating node-to-node calls' }),
  ),
  NODE_ID: Type.Optional(
    Type.String({
      pattern: '^(?!-$)[A-Za-z0-9._:-]{1,100}$',
      description:
        'this node id, unique in the cluster; not `-`, which the store signals name no node with (docs/decisions/0078-store-signals.md)',
    }),
  ),
  NODE_URL: Type.Optional(
    Type.String({ pattern: '^https?://', description: 'base URL other nodes reach this node at' }),
  ),
  DRAIN_GRACE_SECONDS: Type.Number({
    minimum: 0,
    maximum: 60,
    default: 3,
    description: 'with several nodes: how long a stopping node keeps serving after /readyz turns false',
  }),
  CLUSTER_ASK_TIMEOUT_SECONDS: Type.Number({
    exclusiveMinimum: 0,
    maximum: 60,
    default: 3,
    description:
      "with several nodes: how long a view spanning nodes (the dashboard's instance list) waits for each other node's answer",
  }),
  PLATFORM_URL: Type.Optional(
    Type.String({
      pattern: '^wss?://',
      description: 'WebSocket URL of a platform simulator (ws:// or wss://)',
    }),
  ),
  PLATFORM_ROOT_KEY: Type.Optional(
    Type.String({
      pattern: '^[0-9a-fA-F]{64}$',
      description: "simulator's Noise certificate root: 32-byte curve25519 public key, 64 hex characters",
    }),
  ),
  PLATFORM_CA_FILE: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        "PEM file of the CA of a platform simulator's media server (trusted for media uploads and downloads)",
    }),
  ),
});

/** Raw, validated environment (strings converted to numbers where the schema says so). */
export type Env = Static<typeof EnvSchema>;
