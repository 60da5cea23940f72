import { randomUUID } from 'node:crypto';
import { type ExpressionBuilder, type Insertable, type Kysely, sql, type Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import { compiledStatement } from './compiled.ts';
import type { Database, WebhookAttemptsTable } from './schema.ts';

/**
 * Claiming due webhook deliveries (docs/decisions/0005-outbox-and-delivery.md), on Graphile Worker's model
 * (`get_job`): one statement, run concurrently by several processes, picks the eligible rows, locks them for the
 * worker (`locked_by`, `locked_at`) and counts the attempt (`attempts + 1`) as it claims, so an attempt that never
 * finishes (its process keeps dying) still uses up one of the `max_attempts`. See `deliveries.ts` for the rest of the
 * queue's life cycle.
 */

/** A claimed delivery with what an attempt needs. `hmacKeySealed` is opened with the SecretBox. */
export interface ClaimedDelivery {
  eventId: string;
  /**
   * The endpoint (docs/decisions/0035-webhook-endpoints.md); `''` for the instance's default webhook. With
   * `eventId` it identifies the delivery.
   */
  endpointId: string;
  instanceId: string;
  sequence: number;
  /** Attempts made in this round, the claimed one included (it is attempt `attempts` of `maxAttempts`). */
  attempts: number;
  maxAttempts: number;
  /**
   * `locked_at` of this claim, epoch ms. With the worker id it identifies the claim: the attempt's result is
   * applied only while the row still holds both (`finishAttempt`).
   */
  lockedAt: number;
  /** Id of the attempt row written with the claim; the attempt's result completes it. */
  attemptId: string;
  /** Exact body text. */
  payload: string;
  /** The URL as shown (a broker URL's password or token masked, docs/decisions/0037-broker-endpoints.md). */
  url: string;
  /** A broker endpoint's whole URL, sealed, when it carries a password or token; null otherwise. */
  urlSealed: string | null;
  /** The default webhook's sealed HMAC key (null for an endpoint, or when none is configured). */
  hmacKeySealed: string | null;
  /** An endpoint's sealed `whsec_…` secret; null for the default webhook. */
  endpointSecretSealed: string | null;
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
 * The `last_error` of a delivery failed because its last allowed attempt was abandoned too (Graphile Worker's
 * `max_attempts` bound on a job whose runs keep dying): a delivery that crashes its worker cannot retry forever.
 */
export const ATTEMPTS_ABANDONED =
  'attempts abandoned: the worker stopped before the last allowed attempt finished';

/**
 * Claims up to `limit` due deliveries for `workerId` (docs/decisions/0005-outbox-and-delivery.md) in one transaction,
 * and with them:
 * - writes one attempt row per claim (so an attempt a crash cuts short stays visible in the log) and marks the
 *   attempt rows a dead worker left open on those deliveries as {@link ABANDONED};
 * - fails a delivery whose claim would exceed its `max_attempts` (every allowed attempt was started and the last
 *   one abandoned) with `last_error` {@link ATTEMPTS_ABANDONED}, and claims again in its place, so the instance's
 *   next delivery is not held up;
 * - gives back at once a claim whose instance no longer has a webhook URL when its row is read (on PostgreSQL's
 *   READ COMMITTED the URL can be removed between the claiming statement and that read), without counting it.
 *
 * The eligibility rules are {@link lockDue}'s.
 * @returns the claimed deliveries in `sequence` order.
 */
export function claimDeliveries(
  db: Kysely<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  return db.transaction().execute((trx) => claimDeliveriesIn(trx, dialect, options));
}

/** {@link claimDeliveries} inside the transaction `trx`. */
async function claimDeliveriesIn(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  const claimed: ClaimedDelivery[] = [];
  // A round that failed exhausted deliveries is followed by another for the capacity left: each such round
  // fails at least one pending row, so the loop ends.
  for (;;) {
    const locked = await lockDue(trx, dialect, { ...options, limit: options.limit - claimed.length });
    if (locked.length === 0) break;
    const exhausted = locked.filter((row) => row.attempts > row.max_attempts);
    const usable = locked.filter((row) => row.attempts <= row.max_attempts);
    await abandonOpenAttempts(trx, locked, options.now);
    if (exhausted.length > 0) await failExhausted(trx, options, exhausted);
    claimed.push(...(await startAttempts(trx, options, usable)));
    if (exhausted.length === 0 || claimed.length >= options.limit) break;
  }
  return claimed.sort((a, b) => a.sequence - b.sequence);
}

/** A row locked by {@link lockDue}: `attempts` already counts the claimed attempt. */
interface LockedRow {
  event_id: string;
  endpoint_id: string;
  attempts: number;
  max_attempts: number;
}

/**
 * The claiming statement, the same on SQLite and PostgreSQL but for how the chosen rows are locked. The rules hold
 * per lane (docs/decisions/0035-webhook-endpoints.md): an instance's default webhook (`endpoint_id` `''`) and each
 * enabled endpoint are separate queues, so "instance" below reads "lane". Eligible:
 * - the **head** of an instance's queue: its pending delivery with the lowest `sequence` among those due
 *   (`run_at` ≤ now), so deliveries to one URL start in `sequence` order, while a failed one whose retry is not
 *   due yet does not hold up later events (docs/decisions/0005-outbox-and-delivery.md);
 * - of an instance that has a webhook URL and whose webhook was not disabled by a 410;
 * - while no delivery of that instance is in flight (claimed and not stale): one attempt per URL at a time;
 * - not claimed, or claimed before `staleBefore` (its worker died: the claim is taken over).
 * The oldest `run_at` first, at most `limit`. Every row claimed gets `locked_by`/`locked_at` and `attempts + 1`.
 *
 * Plan: it walks the instances with a URL and takes each one's head with `ORDER BY sequence LIMIT 1`, which can
 * only be answered from the (instance_id, status, sequence) index, and tests "in flight" by a seek on
 * (instance_id, locked_at): a plan that does not depend on table statistics (a row-driven form degenerated to
 * seconds per claim on PostgreSQL before autovacuum had analysed a freshly filled queue) and costs
 * O(instances with a URL), not O(backlog). The dialect difference is the lock: PostgreSQL locks the chosen rows
 * with `FOR UPDATE OF d SKIP LOCKED`, so several processes share the queue without waiting on each other, and
 * its re-check of the row's own conditions skips a row another process claimed (or finished) meanwhile; SQLite
 * has one writer at a time, so the statement's rows cannot change under it.
 */
function lockDue(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<LockedRow[]> {
  const { workerId, now, staleBefore, limit } = options;
  return LOCK_DUE[dialect].run(trx, { workerId, now, staleBefore, limit }).then((result) => result.rows);
}

/** The values {@link lockDue}'s statement takes. */
type LockArguments = Pick<ClaimOptions, 'workerId' | 'now' | 'staleBefore' | 'limit'>;

/** {@link lockDue}'s statement for `dialect`, compiled once per store (src/store/compiled.ts). */
function lockDueStatement(dialect: DatabaseConfig['dialect']) {
  return compiledStatement<LockArguments, LockedRow>((db, arg) =>
    db
      .with(
        (cte) => cte('heads').materialized(),
        (qb) =>
          qb
            .selectFrom('instances as i')
            .select((eb) => [
              eb
                .selectFrom('webhook_deliveries as h')
                .select('h.event_id')
                .whereRef('h.instance_id', '=', 'i.id')
                .where('h.endpoint_id', '=', '')
                .where('h.status', '=', 'pending')
                .where('h.run_at', '<=', arg('now'))
                .orderBy('h.sequence')
                .limit(1)
                .as('event_id'),
              sql<string>`''`.as('endpoint_id'),
            ])
            .where('i.webhook_url', 'is not', null)
            .where(({ not, exists, selectFrom }) =>
              not(
                exists(
                  selectFrom('webhook_state as s')
                    .select('s.instance_id')
                    .whereRef('s.instance_id', '=', 'i.id')
                    .where('s.disabled_at', 'is not', null),
                ),
              ),
            )
            .where(({ not, exists, selectFrom }) =>
              not(
                exists(
                  selectFrom('webhook_deliveries as o')
                    .select('o.event_id')
                    .whereRef('o.instance_id', '=', 'i.id')
                    .where('o.endpoint_id', '=', '')
                    // No `status` test: only pending rows hold a lock, and leaving it out keeps the plan on the
                    // (instance_id, locked_at) index rather than scanning the instance's backlog.
                    .where('o.locked_at', '>=', arg('staleBefore')),
                ),
              ),
            )
            // The lanes of the enabled endpoints (docs/decisions/0035-webhook-endpoints.md), by the same rules.
            .unionAll((eb) =>
              eb
                .selectFrom('webhook_endpoints as w')
                .select((eb) => [
                  eb
                    .selectFrom('webhook_deliveries as h')
                    .select('h.event_id')
                    .whereRef('h.instance_id', '=', 'w.instance_id')
                    .whereRef('h.endpoint_id', '=', 'w.id')
                    .where('h.status', '=', 'pending')
                    .where('h.run_at', '<=', arg('now'))
                    .orderBy('h.sequence')
                    .limit(1)
                    .as('event_id'),
                  'w.id as endpoint_id',
                ])
                .where('w.enabled', '=', 1)
                .where(({ not, exists, selectFrom }) =>
                  not(
                    exists(
                      selectFrom('webhook_deliveries as o')
                        .select('o.event_id')
                        .whereRef('o.instance_id', '=', 'w.instance_id')
                        .whereRef('o.endpoint_id', '=', 'w.id')
                        .where('o.locked_at', '>=', arg('staleBefore')),
                    ),
                  ),
                ),
            ),
      )
      .with(
        (cte) => cte('due').materialized(),
        (qb) =>
          qb
            .selectFrom('webhook_deliveries as d')
            .select(['d.event_id', 'd.endpoint_id'])
            .where((eb) =>
              eb(
                eb.refTuple('d.event_id', 'd.endpoint_id'),
                'in',
                eb
                  .selectFrom('heads')
                  .select(['heads.event_id', 'heads.endpoint_id'])
                  .$narrowType<{ event_id: string }>()
                  .$asTuple('event_id', 'endpoint_id'),
              ),
            )
            // Re-checked on the locked row (PostgreSQL): another process may have claimed or finished it.
            .where('d.status', '=', 'pending')
            .where('d.run_at', '<=', arg('now'))
            .where((eb) => eb.or([eb('d.locked_at', 'is', null), eb('d.locked_at', '<', arg('staleBefore'))]))
            .orderBy('d.run_at')
            .limit(arg('limit'))
            .$if(dialect === 'postgres', (q) => q.forUpdate('d').skipLocked()),
      )
      .updateTable('webhook_deliveries')
      .set((eb) => ({ locked_by: arg('workerId'), locked_at: arg('now'), attempts: eb('attempts', '+', 1) }))
      .where((eb) =>
        eb(
          eb.refTuple('event_id', 'endpoint_id'),
          'in',
          eb
            .selectFrom('due')
            .select(['due.event_id', 'due.endpoint_id'])
            .$asTuple('event_id', 'endpoint_id'),
        ),
      )
      .returning(['event_id', 'endpoint_id', 'attempts', 'max_attempts']),
  );
}

/** The claiming statement per dialect. */
const LOCK_DUE = { sqlite: lockDueStatement('sqlite'), postgres: lockDueStatement('postgres') } as const;

/** A delivery's key: its event and its endpoint (`''` for the default webhook). */
interface DeliveryKey {
  event_id: string;
  endpoint_id: string;
}

/** `(event_id, endpoint_id) in (…keys)` on the table of `eb`. */
function keyIn(
  eb: ExpressionBuilder<Database, 'webhook_deliveries' | 'webhook_attempts'>,
  keys: readonly DeliveryKey[],
) {
  return eb(
    eb.refTuple('event_id', 'endpoint_id'),
    'in',
    keys.map((key) => eb.tuple(key.event_id, key.endpoint_id)),
  );
}

/** Marks the attempt rows still open on `keys` (their worker died or gave up the claim) as abandoned. */
async function abandonOpenAttempts(
  trx: Transaction<Database>,
  keys: readonly DeliveryKey[],
  now: number,
): Promise<void> {
  await trx
    .updateTable('webhook_attempts')
    .set({ error: ABANDONED, finished_at: now })
    .where((eb) => keyIn(eb, keys))
    .where('finished_at', 'is', null)
    .execute();
}

/**
 * Fails claimed deliveries that have no attempt left (Graphile Worker: `attempts` reached `max_attempts`): the
 * claim is not counted (`attempts` back to what was made) and the row is unlocked.
 */
async function failExhausted(
  trx: Transaction<Database>,
  { workerId, now }: ClaimOptions,
  keys: readonly DeliveryKey[],
): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      status: 'failed',
      attempts: eb('attempts', '-', 1),
      locked_by: null,
      locked_at: null,
      last_error: ATTEMPTS_ABANDONED,
      last_status: null,
      updated_at: now,
    }))
    .where((eb) => keyIn(eb, keys))
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', now)
    .execute();
}

/**
 * Reads what the attempts on `rows` need and writes their attempt rows; a row whose instance lost its webhook URL
 * meanwhile is given back at once (unlocked, the claim not counted: Graphile Worker's `returnJobs`).
 */
async function startAttempts(
  trx: Transaction<Database>,
  { workerId, now }: ClaimOptions,
  rows: readonly LockedRow[],
): Promise<ClaimedDelivery[]> {
  if (rows.length === 0) return [];
  const details = await trx
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .innerJoin('instances as i', 'i.id', 'd.instance_id')
    .leftJoin('webhook_endpoints as w', (join) =>
      join.onRef('w.id', '=', 'd.endpoint_id').onRef('w.instance_id', '=', 'd.instance_id'),
    )
    .select([
      'd.event_id',
      'd.endpoint_id',
      'd.instance_id',
      'd.sequence',
      'd.attempts',
      'd.max_attempts',
      'e.payload',
      'i.webhook_url',
      'i.hmac_key',
      'w.url as endpoint_url',
      'w.secret as endpoint_secret',
      'w.url_sealed as endpoint_url_sealed',
      'w.enabled as endpoint_enabled',
    ])
    .where((eb) =>
      eb(
        eb.refTuple('d.event_id', 'd.endpoint_id'),
        'in',
        rows.map((row) => eb.tuple(row.event_id, row.endpoint_id)),
      ),
    )
    .execute();
  const out: ClaimedDelivery[] = [];
  const attempts: (Insertable<WebhookAttemptsTable> & {
    event_id: string;
    endpoint_id: string;
    number: number;
  })[] = [];
  const urlGone: DeliveryKey[] = [];
  for (const row of details) {
    const endpoint = row.endpoint_id !== '';
    // An endpoint deleted or disabled (or a default URL removed) since the claim: the claim is given back.
    const url = endpoint ? (row.endpoint_enabled === 1 ? row.endpoint_url : null) : row.webhook_url;
    if (url === null) {
      urlGone.push({ event_id: row.event_id, endpoint_id: row.endpoint_id });
      continue;
    }
    const attemptId = randomUUID();
    attempts.push({
      id: attemptId,
      event_id: row.event_id,
      endpoint_id: row.endpoint_id,
      number: 0, // set below from the attempts already logged
      url,
      worker: workerId,
      attempted_at: now,
      finished_at: null,
      status_code: null,
      duration_ms: null,
      error: null,
      response_body: null,
      response_truncated: 0,
    });
    out.push({
      eventId: row.event_id,
      endpointId: row.endpoint_id,
      instanceId: row.instance_id,
      sequence: Number(row.sequence),
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      lockedAt: now,
      attemptId,
      payload: row.payload,
      url,
      urlSealed: endpoint ? row.endpoint_url_sealed : null,
      hmacKeySealed: endpoint ? null : row.hmac_key,
      endpointSecretSealed: endpoint ? row.endpoint_secret : null,
    });
  }
  if (urlGone.length > 0) await returnClaims(trx, workerId, now, urlGone);
  if (attempts.length === 0) return out;
  // Attempt numbers continue over every round of the event (a redelivery keeps the earlier rows).
  const counts = await trx
    .selectFrom('webhook_attempts')
    .select(['event_id', 'endpoint_id', (eb) => eb.fn.countAll<number>().as('count')])
    .where((eb) => keyIn(eb, attempts))
    .groupBy(['event_id', 'endpoint_id'])
    .execute();
  const previous = new Map(counts.map((row) => [`${row.event_id}/${row.endpoint_id}`, Number(row.count)]));
  for (const attempt of attempts)
    attempt.number = (previous.get(`${attempt.event_id}/${attempt.endpoint_id}`) ?? 0) + 1;
  // One statement for every attempt row of the claim (a round trip each would dominate on PostgreSQL).
  await trx.insertInto('webhook_attempts').values(attempts).execute();
  return out;
}

/** Gives back claims made in this transaction without an attempt: unlocked and not counted. */
async function returnClaims(
  trx: Transaction<Database>,
  workerId: string,
  lockedAt: number,
  keys: readonly DeliveryKey[],
): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set((eb) => ({ locked_by: null, locked_at: null, attempts: eb('attempts', '-', 1) }))
    .where((eb) => keyIn(eb, keys))
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', lockedAt)
    .execute();
}
