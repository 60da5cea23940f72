import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';

/** A stored rate-limit window: requests consumed and when the window resets (epoch ms). */
export interface StoredWindow {
  key: string;
  consumed: number;
  resetAt: number;
}

/** The stored window of `key`, or undefined when none is stored or it had reset by `now` (epoch ms). */
export async function loadWindow(
  db: Kysely<Database>,
  key: string,
  now: number,
): Promise<StoredWindow | undefined> {
  const row = await db
    .selectFrom('rate_limit_windows')
    .selectAll()
    .where('key', '=', key)
    .where('reset_at', '>', now)
    .executeTakeFirst();
  return row ? { key: row.key, consumed: Number(row.consumed), resetAt: Number(row.reset_at) } : undefined;
}

/** Writes `windows` in one statement (insert or replace each by key). */
export async function saveWindows(db: Kysely<Database>, windows: readonly StoredWindow[]): Promise<void> {
  if (windows.length === 0) return;
  await db
    .insertInto('rate_limit_windows')
    .values(windows.map((w) => ({ key: w.key, consumed: w.consumed, reset_at: w.resetAt })))
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => ({
        consumed: eb.ref('excluded.consumed'),
        reset_at: eb.ref('excluded.reset_at'),
      })),
    )
    .execute();
}

/** Deletes windows that reset before `now` (epoch ms). @returns how many. */
export async function pruneWindows(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('rate_limit_windows').where('reset_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
