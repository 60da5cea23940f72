import { sql } from 'kysely';
import { DomainError, STORE_RETRY_AFTER_S } from '../domain/errors.ts';
import { isMigrated, type Store } from '../store/database.ts';
import { isStoreUnavailableError } from '../store/faults.ts';

/**
 * Longest the readiness check waits for the store, ms: a store that does not answer (a network cut that leaves the
 * connections open) is not ready, and the check answers 503 instead of hanging (docs/deploy.md, Health checks).
 */
export const READINESS_TIMEOUT_MS = 5_000;

/** The store did not answer the readiness check in time. */
class StoreSilentError extends Error {
  override name = 'StoreSilentError';
  /** @param ms the time waited, ms. */
  constructor(ms: number) {
    super(`the store did not answer within ${ms} ms`);
  }
}

/**
 * Readiness of this process (docs/decisions/0023-operations.md, docs/decisions/0008-leases-and-fencing.md): the store
 * answers and carries every migration, and the node is registered with a recent heartbeat (a node whose heartbeats
 * fail is about to lose its leases).
 */
export class ReadinessService {
  readonly #store: Store;
  readonly #registered: () => boolean;
  readonly #timeoutMs: number;

  /** `timeoutMs`: how long a check waits for the store, ms (default {@link READINESS_TIMEOUT_MS}). */
  constructor(deps: { store: Store; registered?: () => boolean; timeoutMs?: number }) {
    this.#store = deps.store;
    this.#registered = deps.registered ?? (() => true);
    this.#timeoutMs = deps.timeoutMs ?? READINESS_TIMEOUT_MS;
  }

  /**
   * @throws DomainError not_ready `store is not ready` (the cause is logged by the HTTP layer; with `retryAfter`
   *   5 s when the store cannot be reached or does not answer within the check's time), or
   *   `node is not registered or is handing its instances over` (a cluster node that is not serving).
   */
  async check(): Promise<void> {
    if (!this.#registered())
      throw new DomainError('not_ready', 'node is not registered or is handing its instances over');
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new StoreSilentError(this.#timeoutMs)), this.#timeoutMs);
    });
    try {
      await Promise.race([this.#probe(), silent]);
    } catch (error) {
      // Unreachable (docs/deploy.md, What a database restart does): the answer carries Retry-After too.
      const retryAfter =
        error instanceof StoreSilentError || isStoreUnavailableError(error) ? STORE_RETRY_AFTER_S : undefined;
      throw new DomainError('not_ready', 'store is not ready', {
        cause: error,
        ...(retryAfter === undefined ? {} : { retryAfter }),
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** The store answers and carries every migration. */
  async #probe(): Promise<void> {
    await sql`select 1`.execute(this.#store.db);
    if (!(await isMigrated(this.#store))) throw new Error('migrations pending');
  }
}
