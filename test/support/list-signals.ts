import { randomUUID } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { StoreSignals } from '../../src/store/pg-signals.ts';
import type { Database } from '../../src/store/schema.ts';

/**
 * Resolves once `signals` heard every `instances` signal committed before this call (PostgreSQL,
 * docs/decisions/0088-kept-instance-lists.md): a marker notification is committed on `db`'s store after them and
 * waited for, and PostgreSQL delivers a listener the notifications of different transactions in their commit order
 * (PostgreSQL's documentation, "NOTIFY"). So a kept list that any of those changes dropped is gone by then.
 */
export async function listSignalsHeard(db: Kysely<Database>, signals: StoreSignals): Promise<void> {
  const marker = `marker/${randomUUID()}`;
  const heard = new Promise<void>((resolve) => {
    const stop = signals.subscribe('instances', (items) => {
      if (!items.includes(marker)) return;
      stop();
      resolve();
    });
  });
  await sql`select pg_notify('parley_instances', current_schema() || ' - ' || ${marker})`.execute(db);
  await heard;
}
