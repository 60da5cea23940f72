import { sql } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import { isMigrated, type Store } from '../store/database.ts';

/** Readiness of this process (DESIGN D14): the store answers and carries every migration. */
export class ReadinessService {
  readonly #store: Store;

  constructor(deps: { store: Store }) {
    this.#store = deps.store;
  }

  /** @throws DomainError not_ready `store is not ready` (the cause is logged by the HTTP layer). */
  async check(): Promise<void> {
    try {
      await sql`select 1`.execute(this.#store.db);
      if (!(await isMigrated(this.#store))) throw new Error('migrations pending');
    } catch (error) {
      throw new DomainError('not_ready', 'store is not ready', { cause: error });
    }
  }
}
