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

/**
 * Writes `windows` in one statement, each by key: a key with no stored window, or whose stored window had reset by
 * `now` (epoch ms), takes the one given; a stored window still running keeps its reset time and the greater of the
 * two counts, so a write never lowers the count of a window that is still running nor moves its end
 * (docs/decisions/0019-rate-limits-and-plans.md).
 */
export async function saveWindows(
  db: Kysely<Database>,
  windows: readonly StoredWindow[],
  now: number,
): Promise<void> {
  if (windows.length === 0) return;
  await db
    .insertInto('rate_limit_windows')
    .values(windows.map((w) => ({ key: w.key, consumed: w.consumed, reset_at: w.resetAt })))
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => {
        const running = eb('rate_limit_windows.reset_at', '>', now);
        return {
          consumed: eb
            .case()
            .when(running.and('rate_limit_windows.consumed', '>', eb.ref('excluded.consumed')))
            .then(eb.ref('rate_limit_windows.consumed'))
            .else(eb.ref('excluded.consumed'))
            .end(),
          reset_at: eb
            .case()
            .when(running)
            .then(eb.ref('rate_limit_windows.reset_at'))
            .else(eb.ref('excluded.reset_at'))
            .end(),
        };
      }),
    )
    .execute();
}

/** Deletes windows that reset before `now` (epoch ms). @returns how many. */
export async function pruneWindows(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('rate_limit_windows').where('reset_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
