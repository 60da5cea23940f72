import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import { type Config, ConfigError } from '../config/config.ts';
import { loadMasterKey, SecretBox } from '../security/secrets.ts';
import { migrateToLatest, openStore, type Store, storeFailure } from '../store/database.ts';

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
    await migrateToLatest(store);
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
  const box = new SecretBox(loadMasterKey(config.dataDir, config.secretKey));
  // ioredis is imported only when Redis is configured (docs/decisions/0068-engines-loaded-on-first-use.md).
  const redis = config.redisUrl
    ? new (await import('ioredis')).Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 })
    : undefined;
  redis?.on('error', (error: Error) => logger.warn({ err: error }, 'redis error'));
  return { store, box, redis };
}
