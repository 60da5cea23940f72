import { sql } from 'kysely';
import { DomainError, STORE_RETRY_AFTER_S } from '../domain/errors.ts';
import { isMigrated, type Store } from '../store/database.ts';
import { isStoreUnavailableError } from '../store/faults.ts';

/**
 * Readiness of this process (docs/decisions/0023-operations.md, docs/decisions/0008-leases-and-fencing.md): the store
 * answers and carries every migration, and the node is registered with a recent heartbeat (a node whose heartbeats
 * fail is about to lose its leases).
 */
export class ReadinessService {
  readonly #store: Store;
  readonly #registered: () => boolean;

  constructor(deps: { store: Store; registered?: () => boolean }) {
    this.#store = deps.store;
    this.#registered = deps.registered ?? (() => true);
  }

  /**
   * @throws DomainError not_ready `store is not ready` (the cause is logged by the HTTP layer; with `retryAfter`
   *   5 s when the store cannot be reached), or
   *   `node is not registered or is handing its instances over` (a cluster node that is not serving).
   */
  async check(): Promise<void> {
    if (!this.#registered())
      throw new DomainError('not_ready', 'node is not registered or is handing its instances over');
    try {
      await sql`select 1`.execute(this.#store.db);
      if (!(await isMigrated(this.#store))) throw new Error('migrations pending');
    } catch (error) {
      // Unreachable (docs/deploy.md, What a database restart does): the answer carries Retry-After too.
      const retryAfter = isStoreUnavailableError(error) ? STORE_RETRY_AFTER_S : undefined;
      throw new DomainError('not_ready', 'store is not ready', {
        cause: error,
        ...(retryAfter === undefined ? {} : { retryAfter }),
      });
    }
  }
}
