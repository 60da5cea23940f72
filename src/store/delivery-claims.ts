import { randomUUID } from 'node:crypto';
import { type Insertable, type Kysely, sql, type Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import type { Database, WebhookAttemptsTable } from './schema.ts';

/**
 * Claiming due webhook deliveries (DESIGN D10): the one query several processes run concurrently. See
 * `deliveries.ts` for the queue's shape and the rest of its life cycle.
 */

/** A claimed delivery with what an attempt needs. `hmacKeySealed` is opened with the SecretBox. */
export interface ClaimedDelivery {
  eventId: string;
  instanceId: string;
  sequence: number;
  /** Attempts already made in this round (the claimed attempt is number `attempts + 1` of the round). */
  attempts: number;
  maxAttempts: number;
  /** Id of the attempt row written with the claim; the attempt's result completes it. */
  attemptId: string;
  /** Exact body text. */
  payload: string;
  url: string;
  hmacKeySealed: string | null;
}

/** Parameters of {@link claimDeliveries}; times in epoch ms. */
export interface ClaimOptions {
  workerId: string;
  now: number;
  /** Claims with `locked_at` before this are stale (their worker died) and may be taken over. */
  staleBefore: number;
  /** Most rows to claim (≥ 1). */
  limit: number;
}

/** The error left on an attempt whose worker stopped before it finished. */
export const ABANDONED = 'abandoned: the worker stopped before the attempt finished';

/**
 * Claims due deliveries for `workerId` (DESIGN D10) and, in the same transaction, writes one attempt row per
 * claim (so an attempt a crash cuts short stays visible in the log) and marks attempts a dead worker left open
 * as abandoned.
 *
 * Per instance (one webhook URL) only the due delivery with the lowest `sequence` is eligible, and only while no
 * other delivery of that instance is in flight, so deliveries to one URL start in `sequence` order; a failed
 * attempt moves its row's `run_at` into the future, so later events are not blocked. Instances without a URL,
 * or disabled by a 410, are skipped. PostgreSQL: `FOR UPDATE OF d SKIP LOCKED` in a materialised CTE, so
 * several processes share the queue without waiting on each other; SQLite: the same single
 * `UPDATE … WHERE … IN (SELECT … LIMIT n) RETURNING` (one writer at a time).
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  return db.transaction().execute(async (trx) => {
    const ids = await claimIds(trx, dialect, options);
    if (ids.length === 0) return [];
    const rows = await trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
      .innerJoin('instances as i', 'i.id', 'd.instance_id')
      .select([
        'd.event_id',
        'd.instance_id',
        'd.sequence',
        'd.attempts',
        'd.max_attempts',
        'e.payload',
        'i.webhook_url',
        'i.hmac_key',
      ])
      .where('d.event_id', 'in', ids)
      .orderBy('d.sequence')
      .execute();
    const attemptedAt = new Date(options.now).toISOString();
    await trx
      .updateTable('webhook_attempts')
      .set({ error: ABANDONED, finished_at: attemptedAt })
      .where('event_id', 'in', ids)
      .where('finished_at', 'is', null)
      .execute();
    const counts = await trx
      .selectFrom('webhook_attempts')
      .select(['event_id', (eb) => eb.fn.countAll<number>().as('count')])
      .where('event_id', 'in', ids)
      .groupBy('event_id')
      .execute();
    const previous = new Map(counts.map((row) => [row.event_id, Number(row.count)]));
    const out: ClaimedDelivery[] = [];
    const attempts: Insertable<WebhookAttemptsTable>[] = [];
    for (const row of rows) {
      // The URL is checked by the claim; a row without one here cannot happen inside the transaction.
      if (row.webhook_url === null) continue;
      const attemptId = randomUUID();
      attempts.push({
        id: attemptId,
        event_id: row.event_id,
        number: (previous.get(row.event_id) ?? 0) + 1,
        url: row.webhook_url,
        worker: options.workerId,
        attempted_at: attemptedAt,
        finished_at: null,
        status_code: null,
        duration_ms: null,
        error: null,
        response_body: null,
        response_truncated: 0,
      });
      out.push({
        eventId: row.event_id,
        instanceId: row.instance_id,
        sequence: Number(row.sequence),
        attempts: row.attempts,
        maxAttempts: row.max_attempts,
        attemptId,
        payload: row.payload,
        url: row.webhook_url,
        hmacKeySealed: row.hmac_key,
      });
    }
    // One statement for every attempt row of the claim (a round trip each would dominate on PostgreSQL).
    if (attempts.length > 0) await trx.insertInto('webhook_attempts').values(attempts).execute();
    return out;
  });
}

/** The claiming statement itself; returns the claimed event ids. */
async function claimIds(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<string[]> {
  if (dialect === 'postgres') return claimIdsPostgres(trx, options);
  const { workerId, now, staleBefore, limit } = options;
  const claimed = await trx
    .with(
      (cte) => cte('due').materialized(),
      (qb) => {
        const query = qb
          .selectFrom('webhook_deliveries as d')
          .select('d.event_id')
          .where('d.status', '=', 'pending')
          .where('d.run_at', '<=', now)
          .where((eb) => eb.or([eb('d.locked_at', 'is', null), eb('d.locked_at', '<', staleBefore)]))
          .where((eb) =>
            eb.exists(
              eb
                .selectFrom('instances as i')
                .select('i.id')
                .whereRef('i.id', '=', 'd.instance_id')
                .where('i.webhook_url', 'is not', null),
            ),
          )
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_state as s')
                  .select('s.instance_id')
                  .whereRef('s.instance_id', '=', 'd.instance_id')
                  .where('s.disabled_at', 'is not', null),
              ),
            ),
          )
          // Another delivery of this instance is in flight (claimed, not stale): seek on (instance, locked_at).
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_deliveries as o')
                  .select('o.event_id')
                  .whereRef('o.instance_id', '=', 'd.instance_id')
                  .where('o.locked_at', '>=', staleBefore)
                  .where('o.status', '=', 'pending'),
              ),
            ),
          )
          // An earlier event of this instance is due too: it goes first (seek on (instance, status, sequence)).
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_deliveries as o')
                  .select('o.event_id')
                  .whereRef('o.instance_id', '=', 'd.instance_id')
                  .where('o.status', '=', 'pending')
                  .whereRef('o.sequence', '<', 'd.sequence')
                  .where('o.run_at', '<=', now),
              ),
            ),
          )
          // `run_at` alone, so the (status, run_at) index yields rows in order and LIMIT stops the scan early;
          // order within an instance is already enforced above (only its lowest due sequence is eligible).
          .orderBy('d.run_at')
          .limit(limit);
        return query;
      },
    )
    .updateTable('webhook_deliveries')
    .set({ locked_by: workerId, locked_at: now })
    .where('event_id', 'in', (eb) => eb.selectFrom('due').select('due.event_id'))
    .returning(['event_id'])
    .execute();
  return claimed.map((row) => row.event_id);
}

/**
 * The PostgreSQL claim. It walks instances with a webhook URL and takes each one's head (its lowest-sequence due
 * pending delivery) with `ORDER BY sequence LIMIT 1`, which can only be answered from the
 * (instance_id, status, sequence) index: the plan does not depend on table statistics. (The row-driven form used
 * on SQLite degenerated to seconds per claim on PostgreSQL before autovacuum had analysed a freshly filled queue.)
 * The locking step re-checks `status` and `locked_at` on the row itself, so a claim committed concurrently by
 * another process is re-evaluated and skipped rather than claimed twice.
 */
async function claimIdsPostgres(
  trx: Transaction<Database>,
  { workerId, now, staleBefore, limit }: ClaimOptions,
): Promise<string[]> {
  const result = await sql<{ event_id: string }>`
    with heads as materialized (
      select h.event_id, h.run_at
      from instances i
      cross join lateral (
        select d.event_id, d.run_at, d.locked_at
        from webhook_deliveries d
        where d.instance_id = i.id and d.status = 'pending' and d.run_at <= ${now}
        order by d.sequence
        limit 1
      ) h
      where i.webhook_url is not null
        and (h.locked_at is null or h.locked_at < ${staleBefore})
        and not exists (
          select 1 from webhook_state s where s.instance_id = i.id and s.disabled_at is not null
        )
        and not exists (
          select 1 from webhook_deliveries o
          where o.instance_id = i.id and o.locked_at >= ${staleBefore} and o.status = 'pending'
        )
      order by h.run_at
      limit ${limit}
    ),
    due as materialized (
      select d.event_id
      from webhook_deliveries d
      where d.event_id in (select event_id from heads)
        and d.status = 'pending'
        and (d.locked_at is null or d.locked_at < ${staleBefore})
      for update of d skip locked
    )
    update webhook_deliveries
    set locked_by = ${workerId}, locked_at = ${now}
    where event_id in (select event_id from due)
    returning event_id`.execute(trx);
  return result.rows.map((row) => row.event_id);
}
