import { type Compilable, CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import type { Database } from './schema.ts';

/** Marks a compile-time stand-in for argument `name` (a string no caller's value can equal by chance). */
const SENTINEL = '\u0000parley-argument\u0000';

/** Hands the builder a stand-in for argument `name`, typed as the argument's value. */
export type ArgumentOf<A> = <K extends keyof A & string>(name: K) => A[K];

/** A query of the hot path, built once per store and run with each call's values. */
export interface CompiledStatement<A, R> {
  /**
   * Runs the statement on `db` (a store's Kysely handle or a transaction of it) with `args`.
   * → Kysely's raw result: `rows` (typed `R`) and, for writes, `numAffectedRows`.
   * @throws what the driver throws (store faults become `store_unavailable`, docs/decisions/0011-store-faults.md).
   */
  run(db: Kysely<Database>, args: A): Promise<QueryResult<R>>;
}

/**
 * A statement whose SQL is compiled once per dialect adapter instead of at every call: Kysely builds, freezes and
 * visits a tree of operation nodes for each query, which the send and delivery paths paid on every statement
 * (`npm run bench -- --profile`; docs/benchmarks.md). `build` receives `arg(name)`, a stand-in for each value the
 * statement takes; every stand-in must reach the query as a bound parameter (a value in `values`, `where`, `set`,
 * or a `sql` template), never as SQL text. The compiled parameters are then the stand-ins, replaced by the call's
 * values in place; constants the builder wrote stay as they are.
 *
 * The compiled form is kept per dialect adapter (one per store, shared by its transactions), so one statement
 * serves SQLite and PostgreSQL stores side by side.
 * @throws Error at first use on a store when a stand-in did not become a parameter (a builder mistake).
 */
export function compiledStatement<A extends Record<string, unknown>, R = unknown>(
  build: (db: Kysely<Database>, arg: ArgumentOf<A>) => Compilable<R>,
): CompiledStatement<A, R> {
  const byAdapter = new WeakMap<object, { sql: string; slots: (string | { value: unknown })[] }>();
  const arg = (<K extends keyof A & string>(name: K) => `${SENTINEL}${name}`) as ArgumentOf<A>;
  const compile = (db: Kysely<Database>) => {
    const adapter = db.getExecutor().adapter;
    const cached = byAdapter.get(adapter);
    if (cached) return cached;
    const query = build(db, arg).compile();
    const slots = query.parameters.map((value) =>
      typeof value === 'string' && value.startsWith(SENTINEL) ? value.slice(SENTINEL.length) : { value },
    );
    if (query.sql.includes(SENTINEL)) throw new Error(`an argument became SQL text: ${query.sql}`);
    const compiled = { sql: query.sql, slots };
    byAdapter.set(adapter, compiled);
    return compiled;
  };
  return {
    async run(db, args) {
      const { sql, slots } = compile(db);
      const parameters = slots.map((slot) => (typeof slot === 'string' ? args[slot] : slot.value));
      return db.executeQuery<R>(CompiledQuery.raw(sql, parameters));
    },
  };
}

/** Most rows one multi-row insert carries (bounds a statement's parameters: 13 for a message row). */
export const ROWS_PER_INSERT = 500;

/**
 * Writes `rows` with the statement that fits their number: `one` (a statement compiled once, {@link
 * compiledStatement}) for a single row, the common batch; otherwise `many` for each run of at most
 * {@link ROWS_PER_INSERT} rows, in order.
 * @throws what the statements throw.
 */
export async function insertRows<R>(
  rows: readonly R[],
  one: (row: R) => Promise<unknown>,
  many: (chunk: R[]) => Promise<unknown>,
): Promise<void> {
  const [only] = rows;
  if (rows.length === 1 && only !== undefined) {
    await one(only);
    return;
  }
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) await many(rows.slice(i, i + ROWS_PER_INSERT));
}
