import {
  CompiledQuery,
  type Expression,
  type ExpressionBuilder,
  type Insertable,
  type SqlBool,
  sql,
  type Transaction,
} from 'kysely';
import { compiledListStatement, isPostgres } from './compiled.ts';
import type { LockedRow } from './delivery-claim-statements.ts';
import type { ClaimedDelivery, ClaimOptions } from './delivery-claims.ts';
import { OPEN_ATTEMPT_FIELDS } from './delivery-next.ts';
import { runLast } from './last-statement.ts';
import { KEY_LOOKUPS } from './pg-key-lookups.ts';
import { newRowId } from './row-ids.ts';
import type { Database } from './schema.ts';
import type { WebhookAttemptsTable } from './schema-webhooks.ts';

/**
 * Starting the attempts of a claim (docs/decisions/0005-outbox-and-delivery.md,
 * docs/decisions/0048-lane-batches.md): the claimed rows' payloads and lane settings read, attempt numbers counted,
 * the heads' attempt rows written, and a claim whose lane lost its URL given back. `delivery-claims.ts` locks the
 * rows and calls {@link startAttempts} in the same transaction.
 */

/** A delivery's key: its event and its endpoint (`''` for the default webhook). */
export interface DeliveryKey {
  event_id: string;
  endpoint_id: string;
}

/**
 * `(event_id, endpoint_id) in (…keys)` on the deliveries or attempts of `eb` (`table`: the alias the statement gives
 * them, default none). On SQLite a list of row values, which it looks up in the key's index. On PostgreSQL a list of
 * row values becomes an `or` of one `and` a key, which the planner cannot look up by key: it read the rows of the
 * keys' common endpoint (all of an instance's default-webhook deliveries) and compared each with every key, 40 to
 * 150 ms for a claim of 128 deliveries in a burst (docs/benchmarks.md, step 104). There it is
 * `event_id = any (array[…]) and (event_id, endpoint_id) in (select * from unnest(array[…], array[…]))`: the
 * primary key's index finds the keys' events, and the pairs are matched by a join (docs/decisions/0084-key-lists.md).
 */
export function keyIn<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  keys: readonly DeliveryKey[],
  postgres: boolean,
  table?: string,
): Expression<SqlBool> {
  const column = (name: 'event_id' | 'endpoint_id') =>
    sql.ref(table === undefined ? name : `${table}.${name}`);
  if (!postgres)
    return sql<SqlBool>`(${column('event_id')}, ${column('endpoint_id')}) in (${sql.join(
      keys.map((key) => sql`(${key.event_id}, ${key.endpoint_id})`),
    )})`;
  const events = sql`array[${sql.join(keys.map((key) => key.event_id))}]::varchar[]`;
  const endpoints = sql`array[${sql.join(keys.map((key) => key.endpoint_id))}]::varchar[]`;
  return eb.and([
    sql<SqlBool>`${column('event_id')} = any (${events})`,
    sql<SqlBool>`(${column('event_id')}, ${column('endpoint_id')}) in (select * from unnest(${events}, ${endpoints}))`,
  ]);
}

/** The `locked_at` a claim writes (`ClaimOptions.lockedAt`, on the store's clock), else its `now`. */
export function lockedAtOf(options: Pick<ClaimOptions, 'now' | 'lockedAt'>): number {
  return options.lockedAt ?? options.now;
}

/**
 * The time a claim judges due times (`run_at`) at: `ClaimOptions.dueAt`, else its `locked_at` ({@link lockedAtOf}):
 * both are the claim's time on the store's clock (docs/decisions/0005-outbox-and-delivery.md, "Due times").
 */
export function dueAtOf(options: Pick<ClaimOptions, 'now' | 'lockedAt' | 'dueAt'>): number {
  return options.dueAt ?? lockedAtOf(options);
}

/**
 * Reads what the attempts on the claimed rows need and writes the attempt rows of `heads` (started now); `tails`
 * (the rest of each lane batch) get their attempt numbers but no row: each is started by the transaction that
 * records the attempt before it (`finishAttempt` with `next`). A row whose lane lost its URL meanwhile is given
 * back at once (unlocked, a head's claim not counted: Graphile Worker's `returnJobs`). With `last` the insert of
 * the attempt rows is the transaction's last statement (`runLast`, src/store/last-statement.ts).
 */
export async function startAttempts(
  trx: Transaction<Database>,
  options: ClaimOptions,
  heads: readonly LockedRow[],
  tails: readonly LockedRow[],
  { last = false, abandon }: StartOptions = {},
): Promise<ClaimedDelivery[]> {
  const { workerId, now } = options;
  const lockedAt = lockedAtOf(options);
  const rows = [...heads, ...tails];
  if (rows.length === 0) return [];
  const tailKeys = new Set(tails.map((row) => `${row.event_id}/${row.endpoint_id}`));
  const details = await readDetails(trx, rows, abandon);
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
    // Attempt numbers continue over every round of the event (a redelivery keeps the earlier rows).
    const number = Number(row.attempts_logged) + 1;
    attempts.push({
      id: attemptId,
      event_id: row.event_id,
      endpoint_id: row.endpoint_id,
      number,
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
      lockedAt,
      attemptId,
      attemptNumber: number,
      started: !tail,
      payload: row.payload,
      url,
      urlSealed: endpoint ? row.endpoint_url_sealed : null,
      hmacKeySealed: endpoint ? null : row.hmac_key,
      endpointSecretSealed: endpoint ? row.endpoint_secret : null,
      ...previousSecretOf(endpoint ? row : undefined),
    });
  }
  if (urlGone.length > 0) await returnClaims(trx, workerId, lockedAt, urlGone, true);
  if (tailsUrlGone.length > 0) await returnClaims(trx, workerId, lockedAt, tailsUrlGone, false);
  if (attempts.length === 0) return out;
  // One statement for every started attempt's row (a round trip each would dominate on PostgreSQL).
  const started = attempts.filter((_, index) => out[index]?.started === true);
  if (started.length === 0) return out;
  // With `last`, the transaction's last statement: the commit may go out behind it (docs/decisions/0063-pipelined-commit.md).
  if (last) await runLast(trx, INSERT_ATTEMPTS.query(trx, {}, started));
  else await INSERT_ATTEMPTS.run(trx, {}, started);
  return out;
}

/**
 * The previous secret of a claimed endpoint row and when it stops signing, as `ClaimedDelivery` carries them
 * (docs/decisions/0094-secret-rotation-grace.md); both null for the default webhook (`row` undefined) and for an
 * endpoint without one.
 */
function previousSecretOf(
  row: ClaimDetailRow | undefined,
): Pick<ClaimedDelivery, 'previousSecretSealed' | 'previousSecretExpiresAt'> {
  const sealed = row?.endpoint_previous_secret ?? null;
  const expiresAt = row?.endpoint_previous_secret_expires_at ?? null;
  if (sealed === null || expiresAt === null)
    return { previousSecretSealed: null, previousSecretExpiresAt: null };
  return { previousSecretSealed: sealed, previousSecretExpiresAt: Number(expiresAt) };
}

/** Options of {@link startAttempts}. */
export interface StartOptions {
  /** The insert of the attempt rows is the transaction's last statement (`runLast`, src/store/last-statement.ts). */
  last?: boolean;
  /**
   * The deliveries whose open attempt rows are marked abandoned at `now` (epoch ms) before the details are read
   * ({@link abandonOpenAttempts}): on PostgreSQL in the details' statement (docs/decisions/0063-pipelined-commit.md).
   */
  abandon?: { keys: readonly DeliveryKey[]; now: number };
}

/** The error left on an attempt whose worker stopped before it finished. */
export const ABANDONED = 'abandoned: the worker stopped before the attempt finished';

/**
 * Marks the attempt rows still open on `keys` (their worker died or gave up the claim) as abandoned, at `now` (epoch
 * ms).
 * @throws the store's error.
 */
export async function abandonOpenAttempts(
  trx: Transaction<Database>,
  keys: readonly DeliveryKey[],
  now: number,
): Promise<void> {
  if (keys.length === 0) return;
  await ABANDON_OPEN_ATTEMPTS.run(trx, { now }, keys);
}

/**
 * The statement marking the attempt rows still open on a list of deliveries (`error` {@link ABANDONED},
 * `finished_at` the claim's time): their worker died or gave up the claim. Compiled per count; planned at each run
 * on PostgreSQL (docs/decisions/0084-key-lists.md).
 */
const ABANDON_OPEN_ATTEMPTS = compiledListStatement<{ now: number }, DeliveryKey>(
  { event_id: true, endpoint_id: true },
  (db, arg, keys) =>
    db
      .updateTable('webhook_attempts')
      .set({ error: ABANDONED, finished_at: arg('now') })
      .where((eb) => keyIn(eb, keys, isPostgres(db)))
      .where('finished_at', 'is', null),
  { planEachRun: true },
);

/**
 * The details of `rows` ({@link CLAIM_DETAILS}), after the open attempts of `abandon`'s keys are marked abandoned.
 * On PostgreSQL both are one statement ({@link CLAIM_DETAILS_POSTGRES}): the update a data-modifying `WITH` clause of
 * the read, one round trip less a claim (docs/decisions/0063-pipelined-commit.md). The read's attempt counts do not
 * depend on the update (it changes no row's existence, only open rows' `error` and `finished_at`), and the read sees
 * the snapshot from before it (PostgreSQL documentation, "Data-Modifying Statements in WITH"), so the result is the
 * one of two statements.
 */
async function readDetails(
  trx: Transaction<Database>,
  rows: readonly DeliveryKey[],
  abandon: StartOptions['abandon'],
): Promise<ClaimDetailRow[]> {
  if (!isPostgres(trx)) {
    if (abandon !== undefined) await abandonOpenAttempts(trx, abandon.keys, abandon.now);
    return (await CLAIM_DETAILS.run(trx, {}, rows)).rows;
  }
  const closing = abandon?.keys ?? [];
  const result = await trx.executeQuery<ClaimDetailRow>(
    CompiledQuery.raw(CLAIM_DETAILS_POSTGRES, [
      rows.map((row) => row.event_id),
      rows.map((row) => row.endpoint_id),
      closing.map((key) => key.event_id),
      closing.map((key) => key.endpoint_id),
      abandon?.now ?? 0,
      ABANDONED,
    ]),
  );
  return result.rows;
}

/**
 * {@link CLAIM_DETAILS} on PostgreSQL with the abandoned attempts' update as one key-lookup statement
 * (docs/decisions/0086-generic-key-lookup-plans.md): one text whatever the number of keys, so it is parsed and planned
 * once per connection; each delivery, then its event, instance and endpoint, is read in a `lateral` subquery fenced
 * with `offset 0` (run once per key, in that order), and the open attempts by the keys' event ids.
 * Parameters: $1 and $2 the claimed rows' event and endpoint ids, $3 and $4 those of the deliveries whose open
 * attempts are marked abandoned (empty for none), $5 the time (epoch ms), $6 {@link ABANDONED}.
 */
export const CLAIM_DETAILS_POSTGRES = `${KEY_LOOKUPS} with closing as (
  select * from unnest($3::varchar[], $4::varchar[]) as k(event_id, endpoint_id)
), abandoned as (
  update webhook_attempts a set error = $6::text, finished_at = $5::bigint
  from closing k
  where a.event_id = k.event_id and a.endpoint_id = k.endpoint_id and a.event_id = any ($3::varchar[])
    and coalesce(a.finished_at is null, false)
)
select d.event_id, d.endpoint_id, d.instance_id, d.sequence, d.attempts, d.max_attempts, e.payload,
  i.webhook_url, i.hmac_key, w.url as endpoint_url, w.secret as endpoint_secret,
  w.previous_secret as endpoint_previous_secret,
  w.previous_secret_expires_at as endpoint_previous_secret_expires_at,
  w.url_sealed as endpoint_url_sealed, w.enabled as endpoint_enabled,
  (select count(*) from webhook_attempts a where a.event_id = d.event_id and a.endpoint_id = d.endpoint_id)
    as attempts_logged
from unnest($1::varchar[], $2::varchar[]) as k(event_id, endpoint_id)
cross join lateral (
  select * from webhook_deliveries d
  where d.event_id = k.event_id and coalesce(d.endpoint_id = k.endpoint_id, false) offset 0
) d
cross join lateral (select e.payload from webhook_events e where e.id = d.event_id offset 0) e
cross join lateral (select i.webhook_url, i.hmac_key from instances i where i.id = d.instance_id offset 0) i
left join lateral (
  select w.url, w.secret, w.previous_secret, w.previous_secret_expires_at, w.url_sealed, w.enabled
  from webhook_endpoints w
  where w.id = d.endpoint_id and w.instance_id = d.instance_id offset 0
) w on true`;

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
  /** The endpoint's previous secret (sealed) and when it stops signing (epoch ms; a string or a number). */
  endpoint_previous_secret: string | null;
  endpoint_previous_secret_expires_at: number | string | null;
  endpoint_url_sealed: string | null;
  endpoint_enabled: number | null;
  /** Attempt rows already logged for the delivery (PostgreSQL's count is a bigint: read as a string or a number). */
  attempts_logged: number | string;
}

/**
 * What the attempts on claimed rows need: the event's payload, the lane's URL and keys, and the attempt rows already
 * logged (each counted on the attempts' (event_id, endpoint_id, number) key), in one statement. Compiled per count;
 * SQLite's form (PostgreSQL runs {@link CLAIM_DETAILS_POSTGRES}).
 */
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
        'w.previous_secret as endpoint_previous_secret',
        'w.previous_secret_expires_at as endpoint_previous_secret_expires_at',
        'w.url_sealed as endpoint_url_sealed',
        'w.enabled as endpoint_enabled',
        (eb) =>
          eb
            .selectFrom('webhook_attempts as a')
            .select((count) => count.fn.countAll<number>().as('n'))
            .whereRef('a.event_id', '=', 'd.event_id')
            .whereRef('a.endpoint_id', '=', 'd.endpoint_id')
            .as('attempts_logged'),
      ])
      .where((eb) => keyIn(eb, keys, isPostgres(db), 'd')),
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
    .where((eb) => keyIn(eb, keys, isPostgres(trx)))
    .where('locked_by', '=', workerId)
    .where('locked_at', '=', lockedAt)
    .execute();
}
