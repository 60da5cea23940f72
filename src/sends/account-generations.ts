import type { Kysely } from 'kysely';
import type { EngineSession } from '../engines/engine.ts';
import { readAccountGeneration } from '../store/account-generations.ts';
import type { Database } from '../store/schema.ts';

/**
 * The account generation (`instances.account_generation`, src/store/account-generations.ts) a send accepted now is
 * stored under (`NewSendJob.account`): its job's insert stores nothing once a logout moved it
 * (docs/decisions/0074-logout-cancels-pending-sends.md). Read from the store once per engine session of this process
 * and kept until this process records a logout of the instance ({@link loggedOut}, after its commit): a logout is
 * recorded by the process that holds the instance's session, and a session made here later (the instance back from
 * another node) reads it again. Without a session here (a queued send while the instance is disconnected) it is read
 * at each send. A value kept from before a logout whose recording is still running only refuses more: the send is
 * answered as a logout answers it.
 */
export class AccountGenerations {
  readonly #db: Kysely<Database>;
  /** Per instance, the session the kept read belongs to, and the read. */
  readonly #kept = new Map<string, { session: EngineSession; generation: Promise<number> }>();

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /**
   * The account generation of instance `instanceId` for a send accepted through `session` (undefined: no session
   * here; read from the store every time). @throws the store's error (a failed read is not kept).
   */
  of(instanceId: string, session: EngineSession | undefined): Promise<number> {
    if (session === undefined) return readAccountGeneration(this.#db, instanceId);
    const kept = this.#kept.get(instanceId);
    if (kept?.session === session) return kept.generation;
    const generation = readAccountGeneration(this.#db, instanceId);
    const entry = { session, generation };
    this.#kept.set(instanceId, entry);
    generation.catch(() => {
      if (this.#kept.get(instanceId) === entry) this.#kept.delete(instanceId);
    });
    return generation;
  }

  /** A logout of instance `instanceId` committed here: its generation moved, and is read again at the next send. */
  loggedOut(instanceId: string): void {
    this.#kept.delete(instanceId);
  }
}
