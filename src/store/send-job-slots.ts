import { type Kysely, sql } from 'kysely';
import type { SendJobStatus } from '../domain/sends.ts';
import type { Database } from './schema.ts';

/**
 * The queued sends of an instance that wait for a new-chat slot (the new-chats-per-day cap,
 * docs/decisions/0013-pacing.md), out of the due range of `send_jobs_due` until a freed slot releases them. Times are
 * epoch ms.
 */

/**
 * What a send waiting for a new-chat slot adds to its `run_at` (2^50 ms, some 35,000 years): its place among the
 * waiting ones (`run_at − SLOT_WAIT`, then `seq`) stays in the column that orders the queue, and every real time,
 * a `sendAt` included, stays below it, so no claim, sweep, count of due jobs or first-pending read takes it for due.
 * Only {@link releaseSlotWaiters} takes it off. A constant of the store's rows: it never changes.
 */
export const SLOT_WAIT = 2 ** 50;

/** `pending` as a literal, for the `send_jobs_due` index (src/store/send-job-claims.ts says why). */
const PENDING = sql.lit<SendJobStatus>('pending');

/**
 * Releases the first `limit` of the instance's sends waiting for a new-chat slot (all of them when `limit` is
 * undefined), in the order they wait (`run_at`, then `seq`): each gets back the `run_at` it waited with (its place,
 * the time its slot was first expected), so it is due from then on in that place and claimed in its turn, its claim
 * checking the cap again; `now` (epoch ms) is its `updated_at`. With a `limit`, two statements, each reading only the
 * sends it releases: the first ones read through `send_jobs_due`, then released by their keys (a send canceled in
 * between is left canceled, and not returned); without one, one statement over the instance's waiting sends.
 * @returns the ids released, in that order, and whether more may still wait (the first read found `limit` sends).
 */
export async function releaseSlotWaiters(
  db: Kysely<Database>,
  instanceId: string,
  now: number,
  limit?: number,
): Promise<{ ids: string[]; more: boolean }> {
  if (limit !== undefined && limit <= 0) return { ids: [], more: true };
  let more = false;
  let release = db
    .updateTable('send_jobs')
    .set({ run_at: sql<number>`run_at - ${SLOT_WAIT}`, updated_at: now })
    .where('instance_id', '=', instanceId);
  if (limit === undefined) release = release.where('status', '=', PENDING).where('run_at', '>=', SLOT_WAIT);
  else {
    const first = await db
      .selectFrom('send_jobs')
      .select('id')
      .where('instance_id', '=', instanceId)
      .where('status', '=', PENDING)
      .where('run_at', '>=', SLOT_WAIT)
      .orderBy('run_at')
      .orderBy('seq')
      .limit(limit)
      .execute();
    if (first.length === 0) return { ids: [], more };
    more = first.length === limit;
    // By their keys; still waiting (the status and the wait bound, not written into the text: the key decides).
    release = release
      .where(
        'id',
        'in',
        first.map((row) => row.id),
      )
      .where('status', '=', 'pending')
      .where('run_at', '>=', SLOT_WAIT);
  }
  const rows = await release.returning(['id', 'run_at', 'seq']).execute();
  const ids = rows
    .sort((a, b) => Number(a.run_at) - Number(b.run_at) || Number(a.seq) - Number(b.seq))
    .map((row) => row.id);
  return { ids, more };
}
