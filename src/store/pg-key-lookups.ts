import type pg from 'pg';
import { rolledBack, socketOf, TransactionRolledBack } from './pg-pipelining.ts';

/**
 * Key-lookup statements on PostgreSQL (docs/decisions/0085-key-lookup-plans.md): statements named like any other
 * (pg-statements.ts) but planned at each run under settings that leave the planner only lookups by an index. The
 * named statements' pool adapter recognises their mark and runs them through {@link withKeyLookups}.
 */

/**
 * A statement text that starts with this comment is named, so each connection parses it once, and runs with
 * {@link KEY_LOOKUP_SETTINGS} (docs/decisions/0085-key-lookup-plans.md): planned at each run with its values and the
 * tables' current sizes, as nested loops over the statement's input that find each row by an index. It runs in a
 * transaction of its own, or inside the open one between two `set local`s, so the settings never outlive it. The
 * statement's own text must leave the planner the key's index alone: conditions other than the key written so that
 * no index serves them (src/store/delivery-group.ts, src/store/delivery-starts.ts).
 */
export const KEY_LOOKUPS = '/* key lookups */';

/**
 * The planner settings a {@link KEY_LOOKUPS} statement is planned with (PostgreSQL documentation, "Query Planning"
 * and `plan_cache_mode`): a plan made at each run with the values (a generic one, made once, can keep a whole scan
 * chosen while a table was small), with no sequential scan, hash join or merge join.
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
