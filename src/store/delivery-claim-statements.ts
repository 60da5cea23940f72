import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { DatabaseConfig } from '../config/config.ts';
import { type ArgumentOf, compiledWithLimit } from './compiled.ts';
import { KEY_LOOKUPS } from './pg-key-lookups.ts';
import type { Database } from './schema.ts';

/**
 * The statements that lock due webhook deliveries for a worker (docs/decisions/0005-outbox-and-delivery.md),
 * compiled once per store (src/store/compiled.ts). `delivery-claims.ts` runs them in its claim transaction and
 * holds the rules they implement.
 */

/**
 * A row locked by a claiming statement: `attempts` already counts the claimed attempt for a head, and not yet for
 * a tail row.
 */
export interface LockedRow {
  event_id: string;
  endpoint_id: string;
  instance_id: string;
  sequence: number | string;
  attempts: number;
  max_attempts: number;
}

/**
 * The values the head statement takes, times in epoch ms; the most lanes to lock is given beside them, written into
 * the SQL (src/store/compiled.ts, `compiledWithLimit`).
 */
export type LockArguments = {
  workerId: string;
  /** Rows due at this time (`run_at` ≤ it) are locked: the claim's time on the store's clock. */
  dueAt: number;
  /** Written as the rows' `locked_at`: the claim's time on the store's clock, which `staleBefore` is on too. */
  lockedAt: number;
  staleBefore: number;
};

/**
 * The values the targeted head statement takes: {@link LockArguments} and the instances to look at, as a JSON array
 * of ids on SQLite (read with `json_each`) and an array on PostgreSQL (`= any(…)`).
 */
export type LockOfArguments<D extends DatabaseConfig['dialect']> = LockArguments & {
  instances: D extends 'sqlite' ? string : readonly string[];
};

/**
 * The head statement for `dialect` (its rules: `lockDue` in delivery-claims.ts), over every instance, or over the
 * lanes of `instances` only when given.
 */
function lockDueQuery(
  db: Kysely<Database>,
  arg: ArgumentOf<LockArguments>,
  limit: RawBuilder<number>,
  dialect: DatabaseConfig['dialect'],
  instances?: unknown,
) {
  // One parameter whatever the number of instances. An `in (?, ?, …)` list made SQLite seek each head on the
  // former due index (status, run_at; dropped in migration 0022) over every instance's pending rows, then sort them (EXPLAIN QUERY PLAN), instead of taking the first row
  // of the lane's own index.
  const inList = (column: 'i.id' | 'w.instance_id') =>
    dialect === 'sqlite'
      ? sql<boolean>`${sql.ref(column)} in (select value from json_each(${instances}))`
      : sql<boolean>`${sql.ref(column)} = any(${instances})`;
  return db
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
              .where('h.run_at', '<=', arg('dueAt'))
              .orderBy('h.sequence')
              // Bound, not written into the SQL: with a literal `LIMIT 1` SQLite's planner sought the head on the
              // former due index over every instance's pending rows and sorted them (EXPLAIN QUERY PLAN; in the live
              // scenario a fifth of parley's CPU), instead of the first row of the lane's own index.
              .limit(1)
              .as('event_id'),
            sql<string>`''`.as('endpoint_id'),
          ])
          .where('i.webhook_url', 'is not', null)
          .$if(instances !== undefined, (q) => q.where(inList('i.id')))
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
                  // in-flight index rather than scanning the instance's backlog. `>=` implies that index's
                  // `locked_at IS NOT NULL` (docs/decisions/0061-claimed-delivery-index.md).
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
                  .where('h.run_at', '<=', arg('dueAt'))
                  .orderBy('h.sequence')
                  .limit(1)
                  .as('event_id'),
                'w.id as endpoint_id',
              ])
              .where('w.enabled', '=', 1)
              .$if(instances !== undefined, (q) => q.where(inList('w.instance_id')))
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
        (dialect === 'sqlite'
          ? // SQLite: each head's row sought by its key (`CROSS JOIN` keeps `heads` the outer loop), then the few
            // found sorted. Filtering the former due index by `in (heads)` read every instance's pending rows
            // instead.
            qb
              .selectFrom('heads')
              .crossJoin('webhook_deliveries as d')
              .whereRef('d.event_id', '=', 'heads.event_id')
              .whereRef('d.endpoint_id', '=', 'heads.endpoint_id')
          : qb
              .selectFrom('webhook_deliveries as d')
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
        )
          .select(['d.event_id', 'd.endpoint_id'])
          // Re-checked on the locked row (PostgreSQL): another process may have claimed or finished it.
          .where('d.status', '=', 'pending')
          .where('d.run_at', '<=', arg('dueAt'))
          .where((eb) => eb.or([eb('d.locked_at', 'is', null), eb('d.locked_at', '<', arg('staleBefore'))]))
          .orderBy('d.run_at')
          .limit(limit)
          .$if(dialect === 'postgres', (q) => q.forUpdate('d').skipLocked()),
    )
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      locked_by: arg('workerId'),
      locked_at: arg('lockedAt'),
      attempts: eb('attempts', '+', 1),
    }))
    .where((eb) =>
      eb(
        eb.refTuple('event_id', 'endpoint_id'),
        'in',
        eb.selectFrom('due').select(['due.event_id', 'due.endpoint_id']).$asTuple('event_id', 'endpoint_id'),
      ),
    )
    .returning(['event_id', 'endpoint_id', 'instance_id', 'sequence', 'attempts', 'max_attempts']);
}

/** The head statement per dialect: locks the head of up to `limit` idle lanes. */
export const LOCK_DUE = {
  sqlite: compiledWithLimit<LockArguments, LockedRow>((db, arg, limit) =>
    lockDueQuery(db, arg, limit, 'sqlite'),
  ),
  postgres: compiledWithLimit<LockArguments, LockedRow>((db, arg, limit) =>
    lockDueQuery(db, arg, limit, 'postgres'),
  ),
} as const;

/**
 * The head statement per dialect over the lanes of the instances given only: the same rules, without walking every
 * instance with a URL.
 */
export const LOCK_DUE_OF = {
  sqlite: compiledWithLimit<LockOfArguments<'sqlite'>, LockedRow>((db, arg, limit) =>
    lockDueQuery(db, arg, limit, 'sqlite', arg('instances')),
  ),
  postgres: compiledWithLimit<LockOfArguments<'postgres'>, LockedRow>((db, arg, limit) =>
    lockDueQuery(db, arg, limit, 'postgres', arg('instances')),
  ),
} as const;

/** The values the tail statement takes; times in epoch ms. */
export type TailArguments = {
  workerId: string;
  /** Rows due at this time (`run_at` ≤ it) are locked (the head statement's `dueAt`). */
  dueAt: number;
  /** Written as the rows' `locked_at` (the head statement's `lockedAt`). */
  lockedAt: number;
  staleBefore: number;
  /** The lane: its instance and endpoint (`''` the default webhook). */
  instanceId: string;
  endpointId: string;
  /** The lane head's sequence: the tail starts after it. */
  after: number;
};

/**
 * The tail statement on SQLite, one lane at a time: locks, for the worker that holds a lane's head, the lane's next
 * pending and due rows in `sequence` order (at most `limit`, given beside the arguments), unclaimed or with a stale
 * claim and with an attempt left. Unlike the head statement it counts no attempt: a tail row's attempt is counted,
 * and its attempt row written, when it starts (in the transaction that records the attempt before it,
 * docs/decisions/0048-lane-batches.md). It reads the (instance_id, endpoint_id, status, sequence) index from the head
 * onwards and stops at `limit`. PostgreSQL locks every lane's tail in one statement ({@link LOCK_TAILS_POSTGRES}).
 */
function tailStatement() {
  return compiledWithLimit<TailArguments, LockedRow>((db, arg, limit) =>
    db
      .with(
        (cte) => cte('tail').materialized(),
        (qb) =>
          qb
            .selectFrom('webhook_deliveries as d')
            .select(['d.event_id', 'd.endpoint_id'])
            .where('d.instance_id', '=', arg('instanceId'))
            .where('d.endpoint_id', '=', arg('endpointId'))
            .where('d.status', '=', 'pending')
            .where('d.sequence', '>', arg('after'))
            .where('d.run_at', '<=', arg('dueAt'))
            .where((eb) => eb.or([eb('d.locked_at', 'is', null), eb('d.locked_at', '<', arg('staleBefore'))]))
            // A row with no attempt left is failed when it comes up as a head (the head statement's rule).
            .whereRef('d.attempts', '<', 'd.max_attempts')
            .orderBy('d.sequence')
            .limit(limit),
      )
      .updateTable('webhook_deliveries')
      .set({ locked_by: arg('workerId'), locked_at: arg('lockedAt') })
      .where((eb) =>
        eb(
          eb.refTuple('event_id', 'endpoint_id'),
          'in',
          eb
            .selectFrom('tail')
            .select(['tail.event_id', 'tail.endpoint_id'])
            .$asTuple('event_id', 'endpoint_id'),
        ),
      )
      .returning(['event_id', 'endpoint_id', 'instance_id', 'sequence', 'attempts', 'max_attempts']),
  );
}

/** The tail statement on SQLite (a lane's rows after its head, for a lane batch). */
export const LOCK_TAIL_SQLITE = tailStatement();

/**
 * The tail statement of every lane of a claim at once, PostgreSQL only: for each lane (its instance, endpoint and
 * head's sequence, one array each), the rows {@link LOCK_TAIL_SQLITE} locks one lane at a time, by the same rules
 * and in the same lane order, each lane's read `for update` inside a lateral subquery. Not SKIP LOCKED: a row
 * another transaction holds for a moment (a redelivery) would leave a gap, and the rows after it would start before
 * it; the wait is short, the lane's rows being this claim's alone. One round trip for the claim's tails where one
 * statement a lane cost one each: behind a network, a claim of a dozen lanes waited a dozen round trips
 * (docs/decisions/0062-pipelined-begin.md). Parameters: $1 the worker, $2 the due time and $3 the stale bound
 * (epoch ms, both on the store's clock), $4 the most rows a lane, then the arrays ($5 to $7), and $8 the `locked_at`
 * to write (the claim's time on the store's clock, which $2 and $3 are on too). A {@link KEY_LOOKUPS} statement
 * (docs/decisions/0086-generic-key-lookup-plans.md): its one plan a connection reads each lane's rows through the lanes' index
 * (no other index holds the lane's conditions) and locks them by their primary key, bounded by the tail's event ids,
 * whatever the table's size when the plan was made.
 *
 * A lane another claim took meanwhile is reported, not shared: the head statement judged the lane idle on the
 * snapshot it began with, so a claim of another worker committing during it (its head a row this claim found not yet
 * due, or not yet redelivered) holds the rows after this claim's head. Their live lock is read once the read waited
 * for them, and each such row comes back with `contested` true (its `sequence`, `attempts` and `max_attempts` 0);
 * the caller gives that lane's head and tail back (`claimDeliveriesIn`), so one lane is never sent by two claims at
 * once, out of `sequence` order (test/webhooks/claim-contested-lane.test.ts). Rows locked here have `contested`
 * false.
 */
export const LOCK_TAILS_POSTGRES = `${KEY_LOOKUPS} with lanes as (
  select * from unnest($5::varchar[], $6::varchar[], $7::bigint[]) as l(instance_id, endpoint_id, head_sequence)
), tail as materialized (
  select t.event_id, t.endpoint_id, t.instance_id, t.live from lanes l cross join lateral (
    select d.event_id, d.endpoint_id, d.instance_id, coalesce(d.locked_at >= $3::bigint, false) as live
    from webhook_deliveries d
    where d.instance_id = l.instance_id and d.endpoint_id = l.endpoint_id and d.status = 'pending'
      and d.sequence > l.head_sequence and d.run_at <= $2::bigint
      and d.attempts < d.max_attempts
    order by d.sequence
    limit $4::integer
    for update of d
  ) t
), locked as (
  update webhook_deliveries w set locked_by = $1::varchar, locked_at = $8::bigint
  from tail where w.event_id = tail.event_id and w.event_id = any (array(select event_id from tail where not live))
    and coalesce(w.endpoint_id = tail.endpoint_id and not tail.live, false)
  returning w.event_id, w.endpoint_id, w.instance_id, w.sequence, w.attempts, w.max_attempts
)
select event_id, endpoint_id, instance_id, sequence, attempts, max_attempts, false as contested from locked
union all
select event_id, endpoint_id, instance_id, 0, 0, 0, true from tail where live
order by instance_id, endpoint_id, sequence`;
