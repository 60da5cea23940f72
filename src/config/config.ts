import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { parseCidr } from '../net/addresses.ts';
import { type Env, EnvSchema } from './env.ts';

/**
 * Which store backs parley: the embedded SQLite file or a PostgreSQL server
 * (docs/decisions/0024-engines-and-data-flow.md).
 */
export type DatabaseConfig =
  | { dialect: 'sqlite'; path: string }
  | {
      dialect: 'postgres';
      url: string;
      /**
       * Statements with parameters run as named prepared statements (default true); false for a connection pooler
       * in transaction mode that does not carry them (docs/decisions/0055-named-statements.md).
       */
      preparedStatements?: boolean;
      /**
       * How long a connection with statements waiting may stay silent before it is closed, ms (default
       * `ANSWER_TIMEOUT_MS` of src/store/pg-answers.ts; 0: never; docs/decisions/0011-store-faults.md).
       */
      answerTimeoutMs?: number;
      /**
       * Most connections the process's pool holds at once (default `DEFAULT_POOL_SIZE` of src/store/database.ts),
       * besides the one the store's signals keep (docs/decisions/0080-pool-size.md).
       */
      poolSize?: number;
    };

/** Parsed configuration handed to every part of the service. Durations are in milliseconds. */
export interface Config {
  port: number;
  host: string;
  /** Absolute path of the data folder (SQLite file, master key file). */
  dataDir: string;
  database: DatabaseConfig;
  redisUrl: string | undefined;
  /**
   * 32-byte master key from `SECRET_KEY`, or undefined to use the key file in `dataDir`
   * (docs/decisions/0020-security-promises.md).
   */
  secretKey: Buffer | undefined;
  logLevel: Env['LOG_LEVEL'];
  /** Base URL used in printed examples (`curl` lines); defaults to `http://localhost:PORT`. */
  publicUrl: string;
  /** Prefix of group invite links (docs/api.md#conventions). */
  inviteBaseUrl: string;
  /** How long a verified API key stays cached, milliseconds (revocation evicts earlier). */
  authCacheTtlMs: number;
  webhook: {
    /** Delay before each retry, milliseconds (docs/decisions/0005-outbox-and-delivery.md). */
    retryScheduleMs: number[];
    /** CIDRs operators allow for receivers on their own network (docs/decisions/0020-security-promises.md). */
    allowedCidrs: string[];
    /** Time allowed for one delivery attempt, milliseconds (docs/decisions/0005-outbox-and-delivery.md: 15 s). */
    timeoutMs: number;
    /**
     * Age after which another worker takes over a claimed delivery, milliseconds (a crashed worker's claim);
     * undefined: twice the attempt timeout plus 30 s.
     */
    claimStaleMs: number | undefined;
    /** How long finished events stay in the delivery log, milliseconds (`WEBHOOK_RETENTION_DAYS`). */
    retentionMs: number;
    /**
     * Requests in flight per lane, 1–`MAX_LANE_WINDOW` of env.ts (`WEBHOOK_LANE_WINDOW`, default `DEFAULT_LANE_WINDOW`,
     * 64: a backlog is pipelined on one connection and still arrives in order; 1 sends one at a time;
     * docs/decisions/0050-lane-windows.md, docs/decisions/0058-pipelined-lanes.md, docs/decisions/0089-lane-window-default.md).
     */
    laneWindow: number;
    /**
     * Requests in flight at once in this process over all its lanes, 1–65,536 (`WEBHOOK_MAX_IN_FLIGHT`, default
     * `DEFAULT_WEBHOOK_MAX_IN_FLIGHT` of env.ts, 256; docs/decisions/0089-lane-window-default.md).
     */
    maxInFlight: number;
    /**
     * Lanes sending at once in this process, 1–256 (`WEBHOOK_CONCURRENCY`, default
     * `DEFAULT_WEBHOOK_CONCURRENCY` of env.ts; docs/decisions/0054-delivery-concurrency.md).
     */
    concurrency: number;
  };
  /**
   * The event log (`GET /v1/events`, docs/decisions/0030-event-log.md): `retentionMs` is how long every event is
   * kept at least, milliseconds (`EVENT_RETENTION_DAYS`, default 7 days). An event leaves the store only once it is
   * older than both this and the delivery log's `webhook.retentionMs`, and never while its delivery is pending.
   */
  events: { retentionMs: number };
  /**
   * The local store of received media files (`GET /v1/messages/{id}/media`): `dir` is `<dataDir>/media`,
   * `retentionMs` how long a downloaded file is kept after it was fetched (`MEDIA_RETENTION_DAYS`), `maxBytes`
   * the largest file parley downloads (`MEDIA_MAX_MB`, MB of 2^20 bytes).
   */
  media: { dir: string; retentionMs: number; maxBytes: number };
  /** PEM file of extra certificate authorities trusted for outbound HTTPS (webhooks, media), if any. */
  outboundCaFile: string | undefined;
  /**
   * The ffmpeg binary converting animated MP4 stickers (docs/decisions/0017-messages-and-media.md); undefined: the
   * binary of the optional `@ffmpeg-installer/ffmpeg` package, else `ffmpeg` on the PATH.
   */
  ffmpegPath: string | undefined;
  /** Time allowed for graceful shutdown, milliseconds (docs/decisions/0023-operations.md: 10 s). */
  shutdownTimeoutMs: number;
  /**
   * Where the live engine connects instead of the real platform (docs/decisions/0007-simulator.md, a platform
   * simulator): `url` is the WebSocket URL (`PLATFORM_URL`), `rootKey` the 32-byte curve25519 public key trusted as
   * the Noise certificate root instead of the platform's (`PLATFORM_ROOT_KEY`), `caFile` the absolute path of a PEM
   * file of the certificate authority the simulator's media server certificate comes from, trusted (in addition to
   * the system's) for media uploads and downloads (`PLATFORM_CA_FILE`; present only when set). All unset in production.
   */
  platform: { url: string | undefined; rootKey: Buffer | undefined; caFile?: string };
  /**
   * Several nodes sharing one store and Redis (docs/decisions/0008-leases-and-fencing.md), present when
   * `CLUSTER_SECRET` is set: `secret` authenticates node-to-node calls (at least 32 characters), `nodeId` names this
   * node (default: host name, process id and a random suffix), `nodeUrl` is the base URL other nodes forward requests to
   * (default: `http://HOST:PORT`, the host name when HOST is a wildcard address, with the port actually bound),
   * `drainGraceMs` how long a node stopping on SIGTERM keeps serving after it reported itself not ready, so the load
   * balancer's health check sees it before the listener closes (`DRAIN_GRACE_SECONDS`, default 3, in ms here; set it
   * above the balancer's check interval times its fall count), `askTimeoutMs` how long a view spanning several nodes
   * (the dashboard's instance list) waits for each other node's answer before it answers without it
   * (`CLUSTER_ASK_TIMEOUT_SECONDS`, default 3, in ms here; docs/decisions/0008-leases-and-fencing.md). Absent: one
   * node, no leases and no forwarding.
   */
  cluster?: { secret: string; nodeId?: string; nodeUrl?: string; drainGraceMs: number; askTimeoutMs: number };
}

/** Raised when the environment holds a bad value; the message names the variable and the rule. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

function describe(path: string, message: string): string {
  return `${path.replace(/^\//, '')}: ${message}`;
}

/** A decimal number as written in the environment: `2`, `-1`, `0.5`, `.5`, `2.` (no `0x10`, `1e3`, `true`). */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)$/;

/**
 * Refuses, before TypeBox's conversion, what the conversion would silently turn into another value (README,
 * "Configuration"; docs/decisions/0023-operations.md): for an integer a fraction (truncated), for a number anything
 * but a decimal (`true` → 1, `false` and `0x10` → 0), and a positive number of seconds under half a millisecond
 * (rounded to 0 ms, which means "no wait" or "never" for some settings); for a setting of a few words, a value not
 * among them, naming them.
 * @throws ConfigError naming the variable and the rule.
 */
function checkShape(name: string, value: string): void {
  const schema = EnvSchema.properties[name as keyof Env] as
    | { type?: string; anyOf?: { const?: unknown }[]; minimum?: number }
    | undefined;
  const text = value.trim();
  // TypeBox's conversion truncates "2.5" to 2 for an integer: a fraction is refused instead.
  if (schema?.type === 'integer' && !/^[+-]?\d+$/.test(text))
    throw new ConfigError(`invalid configuration: ${name}: Expected integer`);
  if (schema?.type === 'number') {
    if (!DECIMAL.test(text))
      throw new ConfigError(`invalid configuration: ${name}: Expected number (a decimal such as 2 or 0.5)`);
    // Every number setting is in seconds, kept in milliseconds.
    const seconds = Number(text);
    if (seconds > 0 && Math.round(seconds * 1000) === 0) {
      const zero = schema.minimum === 0 ? ' (or 0)' : '';
      throw new ConfigError(
        `invalid configuration: ${name}: ${text} s is under one millisecond: set at least 0.001${zero}`,
      );
    }
  }
  const literals = schema?.anyOf?.map((member) => member.const);
  if (literals?.every((literal) => typeof literal === 'string') && !literals.includes(value))
    throw new ConfigError(`invalid configuration: ${name}: Expected one of ${literals.join(', ')}`);
}

/**
 * Parses the environment into a {@link Config}.
 * @param env the variables to read, normally `process.env`; empty strings count as unset.
 * @throws ConfigError naming the first variable whose value breaks its rule.
 */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const known = Object.keys(EnvSchema.properties);
  const input: Record<string, unknown> = {};
  for (const name of known) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    checkShape(name, value);
    input[name] = value;
  }
  const converted = Value.Default(EnvSchema, Value.Convert(EnvSchema, input));
  const first = Value.Errors(EnvSchema, converted).First();
  if (first) throw new ConfigError(`invalid configuration: ${describe(first.path, first.message)}`);
  const parsed = converted as Env;
  const dataDir = isAbsolute(parsed.DATA_DIR) ? parsed.DATA_DIR : resolve(parsed.DATA_DIR);
  const retryScheduleMs = parsed.WEBHOOK_RETRY_SCHEDULE.split(',').map((s) => Math.round(Number(s) * 1000));
  const allowedCidrs = parsed.WEBHOOK_ALLOWED_CIDRS.split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const cidr of allowedCidrs) {
    if (parseCidr(cidr) === null) {
      throw new ConfigError(
        `invalid configuration: WEBHOOK_ALLOWED_CIDRS: "${cidr}" is not a CIDR (a.b.c.d/n or x:y::/n)`,
      );
    }
  }
  const platformUrl = parsed.PLATFORM_URL;
  if (platformUrl !== undefined && !URL.canParse(platformUrl)) {
    throw new ConfigError(
      `invalid configuration: PLATFORM_URL: "${platformUrl}" is not a ws:// or wss:// URL`,
    );
  }
  if (parsed.PLATFORM_ROOT_KEY !== undefined && platformUrl === undefined) {
    // The real platform's certificates are signed by its own root: another root only makes sense elsewhere.
    throw new ConfigError(
      'invalid configuration: PLATFORM_ROOT_KEY needs PLATFORM_URL (the simulator the key belongs to)',
    );
  }
  if (parsed.PLATFORM_CA_FILE !== undefined && platformUrl === undefined) {
    // The real platform's media hosts have public certificates: an extra CA only makes sense for a simulator.
    throw new ConfigError(
      'invalid configuration: PLATFORM_CA_FILE needs PLATFORM_URL (the simulator whose media server it certifies)',
    );
  }
  const stale = parsed.WEBHOOK_CLAIM_STALE_SECONDS;
  if (stale !== undefined && stale <= 2 * parsed.WEBHOOK_TIMEOUT_SECONDS) {
    // A claim younger than an attempt can last would let a second worker post the same event concurrently.
    throw new ConfigError(
      `invalid configuration: WEBHOOK_CLAIM_STALE_SECONDS must be more than twice WEBHOOK_TIMEOUT_SECONDS (${2 * parsed.WEBHOOK_TIMEOUT_SECONDS})`,
    );
  }
  if (parsed.CLUSTER_SECRET === undefined && (parsed.NODE_URL ?? parsed.NODE_ID) !== undefined) {
    throw new ConfigError(
      `invalid configuration: ${parsed.NODE_URL === undefined ? 'NODE_ID' : 'NODE_URL'} needs CLUSTER_SECRET (at least 32 characters, the same on every node)`,
    );
  }
  const redisUrl = parsed.REDIS_URL;
  if (redisUrl !== undefined && !(URL.canParse(redisUrl) && /^\/?\d*$/.test(new URL(redisUrl).pathname))) {
    // ioredis throws a TypeError for a URL it cannot parse, and treats a path that is not a number as database NaN.
    throw new ConfigError(
      `invalid configuration: REDIS_URL: "${redisUrl}" is not a redis:// or rediss:// URL with an optional database number`,
    );
  }
  if (parsed.NODE_URL !== undefined && !URL.canParse(parsed.NODE_URL)) {
    throw new ConfigError(
      `invalid configuration: NODE_URL: "${parsed.NODE_URL}" is not an http:// or https:// URL`,
    );
  }
  return {
    ...(parsed.CLUSTER_SECRET === undefined
      ? {}
      : {
          cluster: {
            secret: parsed.CLUSTER_SECRET,
            ...(parsed.NODE_ID === undefined ? {} : { nodeId: parsed.NODE_ID }),
            ...(parsed.NODE_URL === undefined ? {} : { nodeUrl: parsed.NODE_URL.replace(/\/$/, '') }),
            drainGraceMs: Math.round(parsed.DRAIN_GRACE_SECONDS * 1000),
            askTimeoutMs: Math.round(parsed.CLUSTER_ASK_TIMEOUT_SECONDS * 1000),
          },
        }),
    port: parsed.PORT,
    host: parsed.HOST,
    dataDir,
    database: parseDatabaseUrl(parsed.DATABASE_URL, dataDir, {
      preparedStatements: parsed.DATABASE_PREPARED_STATEMENTS === 'on',
      answerTimeoutMs: Math.round(parsed.DATABASE_ANSWER_TIMEOUT_SECONDS * 1000),
      poolSize: parsed.DATABASE_POOL_SIZE,
    }),
    redisUrl: parsed.REDIS_URL,
    secretKey: parsed.SECRET_KEY === undefined ? undefined : parseSecretKey(parsed.SECRET_KEY),
    logLevel: parsed.LOG_LEVEL,
    publicUrl: (parsed.PUBLIC_URL ?? `http://localhost:${parsed.PORT}`).replace(/\/$/, ''),
    inviteBaseUrl: parsed.INVITE_BASE_URL.endsWith('/')
      ? parsed.INVITE_BASE_URL
      : `${parsed.INVITE_BASE_URL}/`,
    authCacheTtlMs: parsed.AUTH_CACHE_TTL_SECONDS * 1000,
    webhook: {
      retryScheduleMs,
      allowedCidrs,
      timeoutMs: Math.round(parsed.WEBHOOK_TIMEOUT_SECONDS * 1000),
      retentionMs: parsed.WEBHOOK_RETENTION_DAYS * 86_400_000,
      laneWindow: parsed.WEBHOOK_LANE_WINDOW,
      maxInFlight: parsed.WEBHOOK_MAX_IN_FLIGHT,
      concurrency: parsed.WEBHOOK_CONCURRENCY,
      claimStaleMs:
        parsed.WEBHOOK_CLAIM_STALE_SECONDS === undefined
          ? undefined
          : Math.round(parsed.WEBHOOK_CLAIM_STALE_SECONDS * 1000),
    },
    events: { retentionMs: parsed.EVENT_RETENTION_DAYS * 86_400_000 },
    media: {
      dir: resolve(dataDir, 'media'),
      retentionMs: parsed.MEDIA_RETENTION_DAYS * 86_400_000,
      maxBytes: parsed.MEDIA_MAX_MB * 1024 * 1024,
    },
    shutdownTimeoutMs: Math.round(parsed.SHUTDOWN_TIMEOUT_SECONDS * 1000),
    outboundCaFile: parsed.OUTBOUND_CA_FILE === undefined ? undefined : resolve(parsed.OUTBOUND_CA_FILE),
    ffmpegPath: parsed.FFMPEG_PATH,
    platform: {
      url: platformUrl,
      rootKey:
        parsed.PLATFORM_ROOT_KEY === undefined ? undefined : Buffer.from(parsed.PLATFORM_ROOT_KEY, 'hex'),
      ...(parsed.PLATFORM_CA_FILE === undefined ? {} : { caFile: resolve(parsed.PLATFORM_CA_FILE) }),
    },
  };
}

/**
 * Reads, at boot, a PEM file of certificates a setting names (`OUTBOUND_CA_FILE`, `PLATFORM_CA_FILE`).
 * @param variable the setting's name, for the message.
 * @throws ConfigError naming the variable when the file cannot be read or holds no PEM certificate.
 */
export function readCertificateFile(variable: string, path: string): Buffer {
  let pem: Buffer;
  try {
    pem = readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : (code ?? (error as Error).message);
    throw new ConfigError(
      `invalid configuration: ${variable}: cannot read "${path}" (${reason}): set ${variable} to a readable PEM file or unset it`,
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----'))
    throw new ConfigError(
      `invalid configuration: ${variable}: "${path}" holds no PEM certificate: set ${variable} to a PEM file of CA certificates`,
    );
  return pem;
}

function parseDatabaseUrl(
  url: string | undefined,
  dataDir: string,
  postgres: { preparedStatements: boolean; answerTimeoutMs: number; poolSize: number },
): DatabaseConfig {
  if (url === undefined) return { dialect: 'sqlite', path: resolve(dataDir, 'parley.db') };
  if (/^postgres(ql)?:/.test(url))
    return {
      dialect: 'postgres',
      url,
      preparedStatements: postgres.preparedStatements,
      answerTimeoutMs: postgres.answerTimeoutMs,
      poolSize: postgres.poolSize,
    };
  const path = url.replace(/^(sqlite|file):(\/\/)?/, '');
  if (path === '') throw new ConfigError('invalid configuration: DATABASE_URL: sqlite: needs a file path');
  return { dialect: 'sqlite', path: path === ':memory:' ? path : resolve(path) };
}

function parseSecretKey(value: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (key.length !== 32)
    throw new ConfigError('invalid configuration: SECRET_KEY: must encode exactly 32 bytes');
  return key;
}
