import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import { extended } from '../domain/objects.ts';
import { isPostgres } from './compiled.ts';
import {
  LOCK_DUE,
  LOCK_DUE_OF,
  LOCK_TAIL_SQLITE,
  LOCK_TAILS_POSTGRES,
  type LockedRow,
} from './delivery-claim-statements.ts';
import {
  abandonOpenAttempts,
  type DeliveryKey,
  dueAtOf,
  keyIn,
  lockedAtOf,
  startAttempts,
} from './delivery-starts.ts';
import { outcomeUnknown } from './faults.ts';
import { LOST_COMMIT_LOCK_TIMEOUT_MS, readAfterLostCommit } from './lost-commits.ts';
import type { Database } from './schema.ts';

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
  /**
   * The endpoint's previous secret, sealed, as the claim read it: null for the default webhook and for an endpoint
   * without one (docs/decisions/0094-secret-rotation-grace.md). It signs an attempt, after the current secret, only
   * when the attempt starts before {@link previousSecretExpiresAt}.
   */
  previousSecretSealed: string | null;
  /** When {@link previousSecretSealed} stops signing, epoch ms; null with it. */
  previousSecretExpiresAt: number | null;
}

/** Parameters of {@link claimDeliveries}; times in epoch ms. */
export interface ClaimOptions {
  workerId: string;
  /** The claim's time: its attempts start at it (`started_at`), and rows it changes are `updated_at` it. */
  now: number;
  /**
   * Deliveries due at this time (`run_at` ≤ it) are claimed: the claim's time on the store's clock, which every
   * node sets and judges due times on (the worker's `storeClock`, docs/decisions/0005-outbox-and-delivery.md,
   * "Due times"); default `lockedAt`, else `now`.
   */
  dueAt?: number;
  /**
   * The claim's `locked_at`, on the store's clock, which every node judges claims stale on (the worker's
   * `storeClock`, docs/decisions/0008-leases-and-fencing.md, "One clock"); default `now`.
   */
  lockedAt?: number;
  /**
   * Claims with `locked_at` before this (on `lockedAt`'s clock) are stale (their worker died) and may be taken
   * over.
   */
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

export { ABANDONED } from './delivery-starts.ts';

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
 * @throws the store's error; when the `commit` lost its answer, the store may hold the claim: see
 *   {@link unconfirmedClaim}.
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
): Promise<ClaimedDelivery[]> {
  if (options.instances?.length === 0) return [];
  /** What the claim's statements claimed: set once they all ran, when the `commit` goes out. */
  let claimed: ClaimedDelivery[] | undefined;
  try {
    return await db.transaction().execute(async (trx) => {
      claimed = await claimDeliveriesIn(trx, dialect, options, { last: true });
      return claimed;
    });
  } catch (error) {
    // Only a `commit` (or the last statement pipelined before it) can fail once `claimed` is set: when its answer
    // was lost, the store may have committed the claim.
    if (claimed !== undefined && claimed.length > 0 && error instanceof Error && outcomeUnknown(error))
      UNCONFIRMED_CLAIMS.set(error, claimed);
    throw error;
  }
}

/** The claims of {@link claimDeliveries} whose commit lost its answer, by the error it threw. */
const UNCONFIRMED_CLAIMS = new WeakMap<object, ClaimedDelivery[]>();

/**
 * The deliveries a claim made before its `commit` failed with `error`, when that commit's outcome is unknown (the
 * connection broke as it committed: `outcomeUnknown`, src/store/faults.ts): the store may hold the claim, the rows
 * locked by the worker and their heads' attempts counted and logged, though the worker was told it failed. Ask
 * {@link claimKeptAfterLostCommit} before sending them. Undefined for any other error of {@link claimDeliveries}
 * (nothing was claimed then) and any other error.
 */
export function unconfirmedClaim(error: unknown): ClaimedDelivery[] | undefined {
  return typeof error === 'object' && error !== null ? UNCONFIRMED_CLAIMS.get(error) : undefined;
}

/**
 * Whether the claim of `claimed` ({@link unconfirmedClaim}: its commit lost its answer) was committed: the attempt
 * row of one of its started heads is in the store. Those ids are drawn afresh by each claim, so no other claim can
 * have written them. On PostgreSQL the commit may still be running on the server when the question comes on another
 * connection, its rows invisible until it ends: the read first waits for the heads' row locks (the claim held them
 * until it ended), for at most {@link LOST_COMMIT_LOCK_TIMEOUT_MS}, and then reads what was committed
 * (docs/decisions/0011-store-faults.md). Runs only after a claim whose outcome is unknown, never on a claim's path.
 * @throws DomainError store_unavailable when a transaction still holds the rows after the timeout (ask again later);
 *   the store's error.
 */
export async function claimKeptAfterLostCommit(
  db: Kysely<Database>,
  claimed: readonly ClaimedDelivery[],
): Promise<boolean> {
  const heads = claimed.filter((delivery) => delivery.started);
  if (heads.length === 0) return false;
  return readAfterLostCommit(
    db,
    (trx) =>
      trx
        .selectFrom('webhook_deliveries')
        .select('event_id')
        .where((eb) =>
          keyIn(
            eb,
            heads.map((head) => ({ event_id: head.eventId, endpoint_id: head.endpointId })),
            isPostgres(trx),
          ),
        )
        .forUpdate()
        .execute(),
    async (reader) =>
      (
        await reader
          .selectFrom('webhook_attempts')
          .select('id')
          .where(
            'id',
            'in',
            heads.map((head) => head.attemptId),
          )
          .execute()
      ).length > 0,
  );
}

/**
 * {@link claimDeliveries} inside the transaction `trx`, which the caller commits: on SQLite the delivery worker runs
 * it as its part of the turn's shared transaction (docs/decisions/0051-turn-groups.md). The claimed rows belong to
 * the worker only once that transaction committed; nothing may be sent before.
 * With `last` (the claim has `trx` to itself) its last statement, the attempt rows' insert, may go unanswered until
 * the commit, which is then written behind it (docs/decisions/0063-pipelined-commit.md).
 * @returns the claimed deliveries in `sequence` order ([] when `options.instances` is empty).
 * @throws the store's error (the transaction then rolls back and nothing is claimed).
 */
export async function claimDeliveriesIn(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
  { last = false }: { last?: boolean } = {},
): Promise<ClaimedDelivery[]> {
  if (options.instances?.length === 0) return [];
  const claimed: ClaimedDelivery[] = [];
  let lanes = 0;
  // A round that failed exhausted deliveries is followed by another for the capacity left: each such round
  // fails at least one pending row, so the loop ends.
  for (;;) {
    const heads = await lockDue(trx, dialect, extended(options, { limit: options.limit - lanes }));
    if (heads.length === 0) break;
    const exhausted = heads.filter((row) => row.attempts > row.max_attempts);
    const locked = heads.filter((row) => row.attempts <= row.max_attempts);
    const { tails: lockedTails, contested } = await lockTails(trx, dialect, options, locked);
    // A lane another claim took while the head statement ran is given back whole (PostgreSQL only,
    // `LOCK_TAILS_POSTGRES`): sent beside that claim's batch, its head and tail would start out of `sequence` order.
    const usable = locked.filter((row) => !contested.has(laneOf(row)));
    const tails = lockedTails.filter((row) => !contested.has(laneOf(row)));
    if (contested.size > 0) await giveBackContested(trx, options, locked, lockedTails, contested);
    const open = [...exhausted, ...usable, ...tails];
    // With rows to start, their open attempts are marked abandoned by the statement reading their details.
    const folded = usable.length + tails.length > 0;
    if (!folded) await abandonOpenAttempts(trx, open, options.now);
    if (exhausted.length > 0) await failExhausted(trx, options, exhausted);
    // A round that failed exhausted deliveries is followed by another, so its insert is not the last statement.
    const started = await startAttempts(trx, options, usable, tails, {
      last: last && exhausted.length === 0,
      ...(folded ? { abandon: { keys: open, now: options.now } } : {}),
    });
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
 *   (`run_at` ≤ `dueAt`), so deliveries to one URL start in `sequence` order, while a failed one whose retry is not
 *   due yet does not hold up later events (docs/decisions/0005-outbox-and-delivery.md);
 * - of an instance that has a webhook URL and whose webhook was not disabled by a 410;
 * - while no delivery of that instance is in flight (claimed and not stale): one attempt per URL at a time;
 * - not claimed, or claimed before `staleBefore` (its worker died: the claim is taken over).
 * The oldest `run_at` first, at most `limit`. Every row claimed gets `locked_by`/`locked_at` and `attempts + 1`.
 * With `instances` only those instances' lanes are looked at, by the same rules.
 *
 * Plan: it walks the instances with a URL and takes each one's head with `ORDER BY sequence LIMIT 1`, which can
 * only be answered from the (instance_id, endpoint_id, status, sequence) index, and tests "in flight" by a seek on
 * the (instance_id, endpoint_id, locked_at) index of claimed rows (docs/decisions/0061-claimed-delivery-index.md):
 * a plan that does not depend on table statistics (a row-driven form degenerated to
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
  const { workerId, staleBefore, limit, instances } = options;
  const args = { workerId, dueAt: dueAtOf(options), lockedAt: lockedAtOf(options), staleBefore };
  const run =
    instances === undefined
      ? LOCK_DUE[dialect].run(trx, args, limit)
      : dialect === 'sqlite'
        ? LOCK_DUE_OF.sqlite.run(trx, extended(args, { instances: JSON.stringify(instances) }), limit)
        : LOCK_DUE_OF.postgres.run(trx, extended(args, { instances }), limit);
  return run.then((result) => result.rows);
}

/**
 * Locks the tails of the lanes whose heads are `heads`: for each, up to `perLane - 1` further pending and due rows
 * of the lane in `sequence` order (a lane batch: the worker sends them one after the other, still one attempt per
 * URL at a time). Runs in the claim's transaction, after the heads are locked, so no other worker can take the
 * lane meanwhile.
 * @returns the rows locked, and (PostgreSQL) the lanes (`<instanceId>/<endpointId>`) another claim, committed while
 *   the head statement ran, holds live rows of (`LOCK_TAILS_POSTGRES`): none of their rows is locked here, and the
 *   caller gives their heads back.
 */
async function lockTails(
  trx: Transaction<Database>,
  dialect: DatabaseConfig['dialect'],
  options: ClaimOptions,
  heads: readonly LockedRow[],
): Promise<{ tails: LockedRow[]; contested: Set<string> }> {
  const perLane = options.perLane ?? 1;
  const contested = new Set<string>();
  if (perLane <= 1 || heads.length === 0) return { tails: [], contested };
  if (dialect === 'postgres') {
    const { rows } = await trx.executeQuery<LockedRow & { contested: boolean }>(
      CompiledQuery.raw(LOCK_TAILS_POSTGRES, [
        options.workerId,
        dueAtOf(options),
        options.staleBefore,
        perLane - 1,
        heads.map((head) => head.instance_id),
        heads.map((head) => head.endpoint_id),
        heads.map((head) => Number(head.sequence)),
        lockedAtOf(options),
      ]),
    );
    for (const row of rows) if (row.contested) contested.add(laneOf(row));
    return { tails: rows.filter((row) => !row.contested), contested };
  }
  // SQLite: statements are calls into this process, one a lane costs no round trip.
  const tails: LockedRow[] = [];
  for (const head of heads) {
    const result = await LOCK_TAIL_SQLITE.run(
      trx,
      {
        workerId: options.workerId,
        dueAt: dueAtOf(options),
        lockedAt: lockedAtOf(options),
        staleBefore: options.staleBefore,
        instanceId: head.instance_id,
        endpointId: head.endpoint_id,
        after: Number(head.sequence),
      },
      perLane - 1,
    );
    tails.push(...result.rows);
  }
  return { tails, contested };
}

/** The lane of a locked row: `<instanceId>/<endpointId>`. */
function laneOf(row: Pick<LockedRow, 'instance_id' | 'endpoint_id'>): string {
  return `${row.instance_id}/${row.endpoint_id}`;
}

/**
 * Gives back, in the claim's transaction, what it locked of the lanes in `contested` (another claim holds them, see
 * `LOCK_TAILS_POSTGRES`): each head unlocked with its counted attempt taken back, each tail row unlocked. Only rows
 * still holding this claim are touched.
 */
async function giveBackContested(
  trx: Transaction<Database>,
  options: ClaimOptions,
  heads: readonly LockedRow[],
  tails: readonly LockedRow[],
  contested: ReadonlySet<string>,
): Promise<void> {
  const of = (rows: readonly LockedRow[]) => rows.filter((row) => contested.has(laneOf(row)));
  for (const [rows, counted] of [
    [of(heads), true],
    [of(tails), false],
  ] as const) {
    if (rows.length === 0) continue;
    await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        locked_by: null,
        locked_at: null,
        attempts: counted ? eb('attempts', '-', 1) : eb.ref('attempts'),
      }))
      .where((eb) => keyIn(eb, rows, isPostgres(trx)))
      .where('locked_by', '=', options.workerId)
      .where('locked_at', '=', lockedAtOf(options))
      .execute();
  }
}

/**
 * Fails claimed deliveries that have no attempt left (Graphile Worker: `attempts` reached `max_attempts`): the
 * claim is not counted (`attempts` back to what was made) and the row is unlocked.
 */
async function failExhausted(
  trx: Transaction<Database>,
  options: ClaimOptions,
  keys: readonly DeliveryKey[],
): Promise<void> {
  const { workerId, now } = options;
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
    .where((eb) => keyIn(eb, keys, isPostgres(trx)))
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', lockedAtOf(options))
    .execute();
}
