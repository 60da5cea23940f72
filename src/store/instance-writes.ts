import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';

/**
 * This process's own writes of `instances` rows, told after they committed to whoever keeps what those rows say
 * (the kept instance lists, docs/decisions/0088-kept-instance-lists.md), so the process's next request never meets
 * an instance as it was before its own write. The store's trigger tells every node the same a moment later; this
 * is the writer's own, immediate, part. Listeners are registered per store handle (the root `Kysely`, never a
 * transaction's).
 */

const listeners = new WeakMap<Kysely<Database>, Set<() => void>>();

/**
 * Calls `listener` after each write of `instances` rows this process commits through `db`, until the returned
 * function is called. `listener` must not throw.
 */
export function onInstancesWritten(db: Kysely<Database>, listener: () => void): () => void {
  let set = listeners.get(db);
  if (set === undefined) {
    set = new Set();
    listeners.set(db, set);
  }
  set.add(listener);
  return () => {
    set.delete(listener);
  };
}

/**
 * Tells the listeners of `db` that rows of `instances` were written and committed. A write made in a transaction
 * is told by the transaction's owner once it committed: called with a transaction (`db.isTransaction`), this does
 * nothing.
 */
export function tellInstancesWritten(db: Kysely<Database>): void {
  if (db.isTransaction) return;
  for (const listener of listeners.get(db) ?? []) listener();
}
