import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import { type Config, ConfigError } from '../config/config.ts';
import { loadMasterKey, SecretBox } from '../security/secrets.ts';
import {
  LOCK_WAIT_MESSAGE,
  migrateToLatest,
  openStore,
  type Store,
  storeFailure,
} from '../store/database.ts';
import { PgSignals, type PgSignalsTiming, type StoreSignals } from '../store/pg-signals.ts';

/** The process's storage: the store (migrated), the secret box sealing stored secrets, and Redis when configured. */
export interface StoreParts {
  store: Store;
  box: SecretBox;
  /** Shared counters and memories (rate limits, sign-in limits, gateway replays); undefined without `REDIS_URL`. */
  redis: Redis | undefined;
}

/**
 * Opens and migrates the store the configuration names.
 * @throws ConfigError with one line naming the store (password masked) and the setting that fixes it
 *   (docs/decisions/0011-store-faults.md).
 */
async function openOwnStore(config: Config, logger: FastifyBaseLogger): Promise<Store> {
  let store: Store | undefined;
  try {
    store = await openStore(config.database, {
      onConnectionError: (error) => logger.warn({ err: error }, 'a store connection failed'),
      onSessionSwitch: (error) =>
        logger.warn(
          { err: error },
          'PostgreSQL sessions change under the connections (a pooler in transaction mode?): statements are no longer prepared; set DATABASE_PREPARED_STATEMENTS=off to say so',
        ),
    });
    await migrateToLatest(store, { onLockWait: () => logger.warn(LOCK_WAIT_MESSAGE) });
    return store;
  } catch (error) {
    await store?.destroy().catch(() => undefined);
    throw new ConfigError(storeFailure(config.database, error));
  }
}

/**
 * Opens the store (or migrates the one a test passes), loads the master key and connects to Redis when
 * `REDIS_URL` is set (its errors are logged, never thrown).
 * @throws ConfigError when the store cannot be opened or migrated; when the master key file is unreadable.
 */
export async function wireStore(
  config: Config,
  options: { logger: FastifyBaseLogger; store?: Store | undefined },
): Promise<StoreParts> {
  const { logger } = options;
  const store = options.store ?? (await openOwnStore(config, logger));
  if (options.store) await migrateToLatest(options.store);
  let key: Buffer;
  try {
    key = loadMasterKey(config.dataDir, config.secretKey);
  } catch (error) {
    // The store opened here is closed, so a start that fails here ends instead of idling with an open pool.
    if (!options.store) await store.destroy().catch(() => undefined);
    throw new ConfigError(masterKeyFailure(config.dataDir, error));
  }
  const box = new SecretBox(key);
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, logger) : undefined;
  return { store, box, redis };
}

/** One line saying why the master key file in `dataDir` could not be created or read, and which setting fixes it. */
function masterKeyFailure(dataDir: string, error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  const reason = typeof code === 'string' ? code : error instanceof Error ? error.message : String(error);
  return `cannot use the master key file in ${dataDir} (${reason}): set DATA_DIR to a writable folder whose secret.key holds 64 hex characters, or set SECRET_KEY`;
}

/** Longest a Redis command may take before it fails and its caller falls back, ms (docs/decisions/0072). */
export const REDIS_COMMAND_TIMEOUT_MS = 1_000;

/** Longest the start waits for Redis to be ready before it goes on without it, ms (docs/decisions/0072). */
export const REDIS_READY_WAIT_MS = 5_000;

/**
 * A Redis client for `url` that never holds a request for an outage (docs/decisions/0072-redis-outages.md): while
 * disconnected its commands fail at once instead of queueing for the reconnection (`enableOfflineQueue: false`);
 * a command fails after {@link REDIS_COMMAND_TIMEOUT_MS}, and a connection that answers nothing for as long is
 * dropped (`socketTimeout`), so the commands after it fail at once too; a command that was not answered is never
 * sent again after a reconnection (its caller has moved on); the client reconnects in the background for as long
 * as the process runs. Waits up to {@link REDIS_READY_WAIT_MS} for the first connection, then goes on either way
 * (logged). Its errors are logged, never thrown. ioredis is imported only here, when Redis is configured
 * (docs/decisions/0068-engines-loaded-on-first-use.md).
 */
async function connectRedis(url: string, logger: FastifyBaseLogger): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    socketTimeout: REDIS_COMMAND_TIMEOUT_MS,
    autoResendUnfulfilledCommands: false,
    connectTimeout: REDIS_READY_WAIT_MS,
  });
  redis.on('error', (error: Error) => logger.warn({ err: error }, 'redis error'));
  let timer: NodeJS.Timeout | undefined;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => redis.once('ready', () => resolve(true))),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), REDIS_READY_WAIT_MS);
    }),
  ]);
  clearTimeout(timer);
  if (!ready)
    logger.warn(
      { waitedMs: REDIS_READY_WAIT_MS },
      'Redis is not reachable: counting rate limits in this process until it is',
    );
  return redis;
}

/**
 * The store's signals between nodes (docs/decisions/0078-store-signals.md): over PostgreSQL's `LISTEN`/`NOTIFY` for a
 * PostgreSQL store, connected once here (a failed first attempt is retried in the background and logged, never
 * thrown); undefined for SQLite, whose readers in other processes keep their polls alone, and behind a pooler in
 * transaction mode (`DATABASE_PREPARED_STATEMENTS=off`), which does not keep a listening session.
 */
export async function wireSignals(
  config: Config,
  options: {
    store: Store;
    nodeId: string;
    logger: FastifyBaseLogger;
    timing?: Partial<PgSignalsTiming> | undefined;
  },
): Promise<StoreSignals | undefined> {
  const { database } = config;
  const schema = options.store.schema;
  if (database.dialect !== 'postgres' || schema === undefined) return undefined;
  // Behind a pooler in transaction mode a listening session is not kept: its signals would go unheard.
  if (database.preparedStatements === false) return undefined;
  const signals = new PgSignals({
    url: database.url,
    schema,
    nodeId: options.nodeId,
    ...(options.timing === undefined ? {} : { timing: options.timing }),
    onError: (error) =>
      options.logger.warn({ err: error }, 'the store signals connection failed; reconnecting'),
  });
  await signals.start();
  return signals;
}
