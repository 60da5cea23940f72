import type pg from 'pg';
import { rolledBack, socketOf, TransactionRolledBack } from './pg-pipelining.ts';

/**
 * Key-lookup statements on PostgreSQL (docs/decisions/0086-generic-key-lookup-plans.md): statements named like any
 * other (pg-statements.ts), planned once per connection under settings that leave the planner only nested loops and
 * index lookups, their reads bounded by their input's keys. The named statements' pool adapter recognises their mark
 * and runs them through {@link withKeyLookups}.
 */

/**
 * A statement text that starts with this comment is named, so each connection parses it once, and runs with
 * {@link KEY_LOOKUP_SETTINGS} (docs/decisions/0086-generic-key-lookup-plans.md): planned once, at its first run on a
 * connection, as nested loops that find each row by an index, and that plan kept until PostgreSQL invalidates it
 * (new statistics, a schema change). It runs in a transaction of its own, or inside the open one between two
 * `set local`s, so the settings never outlive it. The statement's own text must bound every read by its input's
 * keys whatever the tables held when the plan was made: `= any` of the input's keys on a joined table's leading key
 * column, the other conditions under `coalesce` so that no other index serves them, reads that follow one another as
 * `lateral` subqueries fenced with `offset 0` (src/store/delivery-group.ts, src/store/delivery-starts.ts,
 * src/store/delivery-claim-statements.ts; test/store/key-lookup-plans.test.ts checks their plans).
 */
export const KEY_LOOKUPS = '/* key lookups */';

/**
 * The planner settings a {@link KEY_LOOKUPS} statement is planned and run with (PostgreSQL documentation, "Query
 * Planning" and `plan_cache_mode`): its generic plan from the first run (no custom plans first), with no sequential
 * scan, hash join or merge join (docs/decisions/0086-generic-key-lookup-plans.md).
 */
export const KEY_LOOKUP_SETTINGS = [
  'plan_cache_mode = force_generic_plan',
  'enable_seqscan = off',
  'enable_hashjoin = off',
  'enable_mergejoin = off',
];

/** Sets {@link KEY_LOOKUP_SETTINGS} for the rest of the open transaction. */
const KEY_LOOKUPS_ON = KEY_LOOKUP_SETTINGS.map((setting) => `set local ${setting}`).join('; ');

/** Puts the settings of {@link KEY_LOOKUPS_ON} back to the session's own for the rest of the open transaction. */
const KEY_LOOKUPS_OFF = KEY_LOOKUP_SETTINGS.map(
  (setting) => `set local ${setting.slice(0, setting.indexOf(' '))} to default`,
).join('; ');

/**
 * Runs `statement` (a {@link KEY_LOOKUPS} statement, sent by `statement()`) with {@link KEY_LOOKUP_SETTINGS}: outside
 * a transaction as `begin; set local …`, the statement and `commit`; inside one (`inTransaction`) between
 * `set local …` and `set local … to default`. The three are written together (corked) and, on a pipelining client,
 * cost one round trip. Every query goes through `submit`, so a failure is on the open transaction's record as any
 * statement's. → the statement's result.
 * @throws the first failure of the three, in their order ({@link TransactionRolledBack} when the server rolled the
 *   statement's own transaction back without one); outside a transaction nothing of the statement is then kept.
 */
export async function withKeyLookups<R>(
  client: pg.PoolClient,
  inTransaction: boolean,
  submit: (config: string) => Promise<unknown>,
  statement: () => Promise<R>,
): Promise<R> {
  const socket = socketOf(client);
  socket?.cork();
  let before: Promise<unknown>;
  let result: Promise<R>;
  let after: Promise<unknown>;
  try {
    before = submit(inTransaction ? KEY_LOOKUPS_ON : `begin; ${KEY_LOOKUPS_ON}`);
    result = statement();
    after = submit(inTransaction ? KEY_LOOKUPS_OFF : 'commit');
  } finally {
    socket?.uncork();
  }
  const [set, done, ended] = await Promise.allSettled([before, result, after]);
  if (set.status === 'rejected') throw set.reason;
  if (done.status === 'rejected') throw done.reason;
  if (ended.status === 'rejected') throw ended.reason;
  if (!inTransaction && rolledBack(ended.value)) throw new TransactionRolledBack();
  return done.value;
}
