import type { ExpressionBuilder, Insertable, Kysely, Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import { compiledListStatement } from './compiled.ts';
import { LOCK_DUE, LOCK_DUE_OF, LOCK_TAIL, type LockedRow } from './delivery-claim-statements.ts';
import { OPEN_ATTEMPT_FIELDS } from './delivery-next.ts';
import { newRowId } from './row-ids.ts';
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
  /**
   * Attempts made in this round, the claimed one included (it is attempt `attempts` of `maxAttempts`); for a delivery
   * not yet started, the value it has once started.
   */
  attempts: number;
  maxAttempts: number;
  /**
   * `locked_at` of this claim, epoch ms. With the worker id it identifies the claim: the attempt's result is
   * applied only while the row still holds both (`finishAttempt`).
   */
  lockedAt: number;
  /**
   * Id of the attempt row: written with the claim for a started delivery, or when a lane batch's delivery is
   * started; the attempt's result completes it.
   */
  attemptId: string;
  /** The attempt's number in the log of this delivery (over every round). */
  attemptNumber: number;
  /**
   * Whether the claim started the attempt (counted it and wrote its attempt row): true for each lane's head. A lane
   * batch's later deliveries are locked but not started: `finishAttempt` with `next` starts each in the transaction
   * that records the attempt before it (docs/decisions/0048-lane-batches.md).
   */
  started: boolean;
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
  /** Most lanes to claim (≥ 1): with `perLane` 1, most rows. */
  limit: number;
  /**
   * Most deliveries claimed per lane (default 1): the lane's head and up to `perLane - 1` of its next pending and
   * due rows in `sequence` order, which the worker sends one after the other (docs/decisions/0048-lane-batches.md).
   */
  perLane?: number;
  /**
   * Only the lanes of these instances (their default webhook and endpoints; at least one id): a worker woken by
   * new events of a few instances claims from those without walking every instance with a URL. Default: every
   * instance.
   */
  instances?: readonly string[];
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
 * The eligibility rules are {@link lockDue}'s; with `perLane` > 1 each claimed head brings its lane's next rows
 * ({@link lockTails}).
 * @returns the claimed deliveries in `sequence` order.
 */
export function claimDeliveries(
  db: Kysely<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  if (options.instances?.length === 0) return Promise.resolve([]);
  return db.transaction().execute((trx) => claimDeliveriesIn(trx, dialect, options));
}

/**
 * {@link claimDeliveries} inside the transaction `trx`, which the caller commits: on SQLite the delivery worker runs
 * it as its part of the turn's shared transaction (docs/decisions/0051-turn-groups.md). The claimed rows belong to
 * the worker only once that transaction committed; nothing may be sent before.
 * @returns the claimed deliveries in `sequence` order ([] when `options.instances` is empty).
 * @throws the store's error (the transaction then rolls back and nothing is claimed).
 */
export async function claimDeliveriesIn(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  if (options.instances?.length === 0) return [];
  const claimed: ClaimedDelivery[] = [];
  let lanes = 0;
  // A round that failed exhausted deliveries is followed by another for the capacity left: each such round
  // fails at least one pending row, so the loop ends.
  for (;;) {
    const heads = await lockDue(trx, dialect, { ...options, limit: options.limit - lanes });
    if (heads.length === 0) break;
    const exhausted = heads.filter((row) => row.attempts > row.max_attempts);
    const usable = heads.filter((row) => row.attempts <= row.max_attempts);
    const tails = await lockTails(trx, dialect, options, usable);
    await abandonOpenAttempts(trx, [...heads, ...tails], options.now);
    if (exhausted.length > 0) await failExhausted(trx, options, exhausted);
    const started = await startAttempts(trx, options, usable, tails);
    claimed.push(...started);
    lanes += new Set(started.map((delivery) => `${delivery.instanceId}/${delivery.endpointId}`)).size;
    if (exhausted.length === 0 || lanes >= options.limit) break;
  }
  return claimed.sort((a, b) => a.sequence - b.sequence);
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
 * With `instances` only those instances' lanes are looked at, by the same rules.
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
  const { workerId, now, staleBefore, limit, instances } = options;
  const args = { workerId, now, staleBefore };
  const run =
    instances === undefined
      ? LOCK_DUE[dialect].run(trx, args, limit)
      : dialect === 'sqlite'
        ? LOCK_DUE_OF.sqlite.run(trx, { ...args, instances: JSON.stringify(instances) }, limit)
        : LOCK_DUE_OF.postgres.run(trx, { ...args, instances }, limit);
  return run.then((result) => result.rows);
}

/**
 * Locks the tails of the lanes whose heads are `heads`: for each, up to `perLane - 1` further pending and due rows
 * of the lane in `sequence` order (a lane batch: the worker sends them one after the other, still one attempt per
 * URL at a time). Runs in the claim's transaction, after the heads are locked, so no other worker can take the
 * lane meanwhile.
 */
async function lockTails(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
  heads: readonly LockedRow[],
): Promise<LockedRow[]> {
  const perLane = options.perLane ?? 1;
  if (perLane <= 1) return [];
  const tails: LockedRow[] = [];
  for (const head of heads) {
    const result = await LOCK_TAIL[dialect].run(
      trx,
      {
        workerId: options.workerId,
        now: options.now,
        staleBefore: options.staleBefore,
        instanceId: head.instance_id,
        endpointId: head.endpoint_id,
        after: Number(head.sequence),
      },
      perLane - 1,
    );
    tails.push(...result.rows);
  }
  return tails;
}

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
  if (keys.length === 0) return;
  await ABANDON_OPEN_ATTEMPTS.run(trx, { now }, keys);
}

const ABANDON_OPEN_ATTEMPTS = compiledListStatement<{ now: number }, DeliveryKey>(
  { event_id: true, endpoint_id: true },
  (db, arg, keys) =>
    db
      .updateTable('webhook_attempts')
      .set({ error: ABANDONED, finished_at: arg('now') })
      .where((eb) => keyIn(eb, keys))
      .where('finished_at', 'is', null),
);

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
 * Reads what the attempts on the claimed rows need and writes the attempt rows of `heads` (started now); `tails`
 * (the rest of each lane batch) get their attempt numbers but no row: each is started by the transaction that
 * records the attempt before it (`finishAttempt` with `next`). A row whose lane lost its URL meanwhile is given
 * back at once (unlocked, a head's claim not counted: Graphile Worker's `returnJobs`).
 */
async function startAttempts(
  trx: Transaction<Database>,
  { workerId, now }: ClaimOptions,
  heads: readonly LockedRow[],
  tails: readonly LockedRow[],
): Promise<ClaimedDelivery[]> {
  const rows = [...heads, ...tails];
  if (rows.length === 0) return [];
  const tailKeys = new Set(tails.map((row) => `${row.event_id}/${row.endpoint_id}`));
  const { rows: details } = await CLAIM_DETAILS.run(trx, {}, rows);
  const out: ClaimedDelivery[] = [];
  const attempts: (Insertable<WebhookAttemptsTable> & {
    event_id: string;
    endpoint_id: string;
    number: number;
  })[] = [];
  const urlGone: DeliveryKey[] = [];
  const tailsUrlGone: DeliveryKey[] = [];
  for (const row of details) {
    const endpoint = row.endpoint_id !== '';
    // An endpoint deleted or disabled (or a default URL removed) since the claim: the claim is given back.
    const url = endpoint ? (row.endpoint_enabled === 1 ? row.endpoint_url : null) : row.webhook_url;
    const tail = tailKeys.has(`${row.event_id}/${row.endpoint_id}`);
    if (url === null) {
      (tail ? tailsUrlGone : urlGone).push({ event_id: row.event_id, endpoint_id: row.endpoint_id });
      continue;
    }
    const attemptId = newRowId();
    attempts.push({
      id: attemptId,
      event_id: row.event_id,
      endpoint_id: row.endpoint_id,
      number: 0, // set below from the attempts already logged
      url,
      worker: workerId,
      attempted_at: now,
      ...OPEN_ATTEMPT_FIELDS,
    });
    out.push({
      eventId: row.event_id,
      endpointId: row.endpoint_id,
      instanceId: row.instance_id,
      sequence: Number(row.sequence),
      attempts: tail ? row.attempts + 1 : row.attempts,
      maxAttempts: row.max_attempts,
      lockedAt: now,
      attemptId,
      attemptNumber: 0, // set below from the attempts already logged
      started: !tail,
      payload: row.payload,
      url,
      urlSealed: endpoint ? row.endpoint_url_sealed : null,
      hmacKeySealed: endpoint ? null : row.hmac_key,
      endpointSecretSealed: endpoint ? row.endpoint_secret : null,
    });
  }
  if (urlGone.length > 0) await returnClaims(trx, workerId, now, urlGone, true);
  if (tailsUrlGone.length > 0) await returnClaims(trx, workerId, now, tailsUrlGone, false);
  if (attempts.length === 0) return out;
  // Attempt numbers continue over every round of the event (a redelivery keeps the earlier rows).
  const { rows: counts } = await COUNT_ATTEMPTS.run(trx, {}, attempts);
  const previous = new Map(counts.map((row) => [`${row.event_id}/${row.endpoint_id}`, Number(row.count)]));
  for (const [index, attempt] of attempts.entries()) {
    attempt.number = (previous.get(`${attempt.event_id}/${attempt.endpoint_id}`) ?? 0) + 1;
    const delivery = out[index];
    if (delivery !== undefined) delivery.attemptNumber = attempt.number;
  }
  // One statement for every started attempt's row (a round trip each would dominate on PostgreSQL).
  const started = attempts.filter((_, index) => out[index]?.started === true);
  if (started.length > 0) await INSERT_ATTEMPTS.run(trx, {}, started);
  return out;
}

/** A claimed row with what its attempt needs; the endpoint's columns are null for the default webhook. */
interface ClaimDetailRow {
  event_id: string;
  endpoint_id: string;
  instance_id: string;
  sequence: number;
  attempts: number;
  max_attempts: number;
  payload: string;
  webhook_url: string | null;
  hmac_key: string | null;
  endpoint_url: string | null;
  endpoint_secret: string | null;
  endpoint_url_sealed: string | null;
  endpoint_enabled: number | null;
}

/** What the attempts on claimed rows need: the event's payload and the lane's URL and keys (compiled per count). */
const CLAIM_DETAILS = compiledListStatement<Record<never, never>, DeliveryKey, ClaimDetailRow>(
  { event_id: true, endpoint_id: true },
  (db, _arg, keys) =>
    db
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
          keys.map((key) => eb.tuple(key.event_id, key.endpoint_id)),
        ),
      ),
);

/** Attempt rows already logged per delivery (compiled per count). */
const COUNT_ATTEMPTS = compiledListStatement<
  Record<never, never>,
  DeliveryKey,
  DeliveryKey & { count: number | string }
>({ event_id: true, endpoint_id: true }, (db, _arg, keys) =>
  db
    .selectFrom('webhook_attempts')
    .select(['event_id', 'endpoint_id', (eb) => eb.fn.countAll<number>().as('count')])
    .where((eb) => keyIn(eb, keys))
    .groupBy(['event_id', 'endpoint_id']),
);

/** Started attempts' rows in one statement (compiled per count). */
const INSERT_ATTEMPTS = compiledListStatement<
  Record<never, never>,
  Insertable<WebhookAttemptsTable> & { endpoint_id: string }
>(
  {
    id: true,
    event_id: true,
    endpoint_id: true,
    number: true,
    url: true,
    worker: true,
    attempted_at: true,
    finished_at: true,
    status_code: true,
    duration_ms: true,
    error: true,
    response_body: true,
    response_truncated: true,
  },
  (db, _arg, rows) => db.insertInto('webhook_attempts').values(rows),
);

/**
 * Gives back claims made in this transaction without an attempt: unlocked, and a head's counted attempt
 * (`counted`) taken back.
 */
async function returnClaims(
  trx: Transaction<Database>,
  workerId: string,
  lockedAt: number,
  keys: readonly DeliveryKey[],
  counted: boolean,
): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      locked_by: null,
      locked_at: null,
      attempts: counted ? eb('attempts', '-', 1) : eb.ref('attempts'),
    }))
    .where((eb) => keyIn(eb, keys))
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', lockedAt)
    .execute();
}
