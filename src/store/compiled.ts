import {
  type Compilable,
  CompiledQuery,
  type Kysely,
  PostgresAdapter,
  type QueryResult,
  type RawBuilder,
  sql,
} from 'kysely';
import { PLAN_EACH_RUN } from './pg-statements.ts';
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
  /**
   * The statement {@link run} would execute on `db` with `args`, not executed: its SQL and bound parameters (to be
   * run together with others, src/store/write-groups.ts).
   */
  query(db: Kysely<Database>, args: A): CompiledQuery<R>;
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
  const byAdapter = new WeakMap<object, CompiledForm>();
  const compile = (db: Kysely<Database>) => {
    const adapter = db.getExecutor().adapter;
    const cached = byAdapter.get(adapter);
    if (cached) return cached;
    const compiled = compiledForm(build(db, standInOf as ArgumentOf<A>));
    byAdapter.set(adapter, compiled);
    return compiled;
  };
  const query = (db: Kysely<Database>, args: A): CompiledQuery<R> => {
    const { sql, slots } = compile(db);
    return CompiledQuery.raw(sql, bind(slots, args, [])) as CompiledQuery<R>;
  };
  return {
    async run(db, args) {
      return db.executeQuery<R>(query(db, args));
    },
    query,
  };
}

/** A {@link compiledStatement} whose LIMIT is written into its SQL, see {@link compiledWithLimit}. */
export interface CompiledLimitStatement<A, R> {
  /**
   * Runs the statement on `db` with `args` and `limit` (a whole number ≥ 0).
   * → Kysely's raw result, as {@link CompiledStatement.run}.
   * @throws RangeError when `limit` is not a whole number ≥ 0; what the driver throws otherwise.
   */
  run(db: Kysely<Database>, args: A, limit: number): Promise<QueryResult<R>>;
}

/**
 * {@link compiledStatement} for a statement with a LIMIT: `build` receives the limit as a SQL literal, and the
 * statement is compiled once per limit value (a worker's free lanes, a lane batch: a few small numbers fixed by
 * configuration). SQLite's query planner may use the value of a LIMIT, so a statement whose LIMIT is a bound
 * parameter is prepared again at every run once the parameter is bound: for the delivery claim that was 90 to
 * 170 µs a run, twenty times the statement's own work (docs/benchmarks.md, step 26). The planner sees the value, so
 * check the plan (EXPLAIN QUERY PLAN) of a statement moved to a literal LIMIT: a literal `LIMIT 1` in the delivery
 * claim's correlated subqueries chose a worse index than the bound one did.
 */
export function compiledWithLimit<A extends Record<string, unknown>, R = unknown>(
  build: (db: Kysely<Database>, arg: ArgumentOf<A>, limit: RawBuilder<number>) => Compilable<R>,
): CompiledLimitStatement<A, R> {
  const byLimit = new Map<number, CompiledStatement<A, R>>();
  return {
    run(db, args, limit) {
      if (!Number.isSafeInteger(limit) || limit < 0)
        return Promise.reject(new RangeError(`limit must be a whole number ≥ 0, got ${limit}`));
      let statement = byLimit.get(limit);
      if (statement === undefined) {
        statement = compiledStatement<A, R>((inner, arg) => build(inner, arg, sql.lit(limit)));
        byLimit.set(limit, statement);
      }
      return statement.run(db, args);
    },
  };
}

/** Where a compiled parameter's value comes from: an argument, a field of a list's item, or the builder itself. */
type Slot = { arg: string } | { item: number; key: string } | { value: unknown };

/** A statement's SQL and, for each of its parameters, where the value comes from. */
interface CompiledForm {
  sql: string;
  slots: Slot[];
}

/** Separates an item's index from its key inside an item stand-in (never part of an argument's name). */
const ITEM = '\u0001';

/** The stand-in for argument `name` (see {@link ArgumentOf}). */
function standInOf(name: string): string {
  return `${SENTINEL}${name}`;
}

/**
 * Compiles a query built with stand-ins and notes where each parameter's value comes from.
 * @throws Error when a stand-in became SQL text instead of a parameter (a builder mistake).
 */
function compiledForm(query: Compilable<unknown>): CompiledForm {
  const { sql, parameters } = query.compile();
  if (sql.includes(SENTINEL)) throw new Error(`an argument became SQL text: ${sql}`);
  const slots = parameters.map((value): Slot => {
    if (typeof value !== 'string' || !value.startsWith(SENTINEL)) return { value };
    const name = value.slice(SENTINEL.length);
    const at = name.indexOf(ITEM);
    return at === -1 ? { arg: name } : { item: Number(name.slice(0, at)), key: name.slice(at + 1) };
  });
  return { sql, slots };
}

/**
 * The parameters of one run: each slot's argument, item field or builder constant.
 * @throws RangeError when an item lacks a field (undefined): the builder would have left its column to the default.
 */
function bind(slots: readonly Slot[], args: Record<string, unknown>, items: readonly object[]): unknown[] {
  return slots.map((slot) => {
    if ('value' in slot) return slot.value;
    if ('arg' in slot) return args[slot.arg];
    const item: Partial<Record<string, unknown>> | undefined = items[slot.item];
    const value = item?.[slot.key];
    if (value === undefined) throw new RangeError(`item ${slot.item} has no ${slot.key}`);
    return value;
  });
}

/** Most rows one multi-row insert carries (bounds a statement's parameters: 13 for a message row). */
export const ROWS_PER_INSERT = 500;

/** Longest list a {@link compiledListStatement} keeps compiled forms for; a longer one is built at each call. */
export const COMPILED_LIST_MAX = 64;

/** A statement over a list (the rows of a multi-row insert, the values of an `in`), see {@link compiledListStatement}. */
export interface CompiledListStatement<A, I, R> {
  /**
   * Runs the statement on `db` (a store's Kysely handle or a transaction of it) with `args` and `items` (at least
   * one: an empty `values` or `in` list is not SQL).
   * → Kysely's raw result: `rows` (typed `R`) and, for writes, `numAffectedRows`.
   * @throws RangeError when `items` is empty or an item lacks a field (undefined); what the driver throws otherwise.
   */
  run(db: Kysely<Database>, args: A, items: readonly I[]): Promise<QueryResult<R>>;
  /**
   * The statement {@link run} would execute, not executed: its SQL and bound parameters, to be run together with
   * others (src/store/write-groups.ts).
   * @throws RangeError as {@link run}.
   */
  query(db: Kysely<Database>, args: A, items: readonly I[]): CompiledQuery<R>;
}

/** Whether `db` (a store's Kysely handle or a transaction of it) is a PostgreSQL store. */
export function isPostgres(db: Kysely<Database>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** Options of {@link compiledListStatement}. */
export interface CompiledListOptions {
  /**
   * On PostgreSQL the statement is planned at each run with its values (`PLAN_EACH_RUN`, src/store/pg-statements.ts):
   * for a lookup of a list of keys in tables that grow, whose generic plan, made while they were small, would keep
   * scanning them whole (docs/decisions/0084-key-lists.md). Default false.
   */
  planEachRun?: boolean;
}

/**
 * {@link compiledStatement} for a statement whose shape follows a list's length: `build` receives stand-ins for
 * the arguments and a list of items whose every field is a stand-in (`fields` names each field of an item, all
 * of them: the type checker refuses a missing or an extra one), and the SQL is compiled once per
 * dialect adapter and list length. Kysely building a multi-row insert for each batch of the recorder was a fifth
 * of the send path's CPU (`npm run bench -- --profile`; docs/benchmarks.md). Lists longer than
 * {@link COMPILED_LIST_MAX} are built at each call with the real values, each item cut to its declared fields
 * (their cost is shared by many items, and keeping a compiled form for every length would hold a statement text
 * per length).
 * @throws Error at first use of a length on a store when a stand-in did not become a parameter (a builder mistake).
 */
export function compiledListStatement<A extends Record<string, unknown>, I extends object, R = unknown>(
  fields: { readonly [K in keyof I & string]-?: true },
  build: (db: Kysely<Database>, arg: ArgumentOf<A>, items: I[]) => Compilable<R>,
  options: CompiledListOptions = {},
): CompiledListStatement<A, I, R> {
  const keys = Object.keys(fields);
  const planned = (db: Kysely<Database>, text: string): string =>
    options.planEachRun === true && isPostgres(db) ? `${PLAN_EACH_RUN} ${text}` : text;
  const byAdapter = new WeakMap<object, Map<number, CompiledForm>>();
  const standIns = (length: number): I[] =>
    Array.from(
      { length },
      (_, index) => Object.fromEntries(keys.map((key) => [key, standInOf(`${index}${ITEM}${key}`)])) as I,
    );
  const compile = (db: Kysely<Database>, length: number) => {
    const adapter = db.getExecutor().adapter;
    let lengths = byAdapter.get(adapter);
    if (!lengths) {
      lengths = new Map();
      byAdapter.set(adapter, lengths);
    }
    const cached = lengths.get(length);
    if (cached) return cached;
    const form = compiledForm(build(db, standInOf as ArgumentOf<A>, standIns(length)));
    const compiled = { sql: planned(db, form.sql), slots: form.slots };
    lengths.set(length, compiled);
    return compiled;
  };
  /** `item` cut to the declared fields; @throws RangeError naming a field the item lacks. */
  const fieldsOf = (item: I, index: number): I => {
    const source: Partial<Record<string, unknown>> = item;
    const cut: Record<string, unknown> = {};
    for (const key of keys) {
      const value = source[key];
      if (value === undefined) throw new RangeError(`item ${index} has no ${key}`);
      cut[key] = value;
    }
    return cut as I;
  };
  const query = (db: Kysely<Database>, args: A, items: readonly I[]): CompiledQuery<R> => {
    if (items.length === 0) throw new RangeError('a list statement needs at least one item');
    if (items.length > COMPILED_LIST_MAX) {
      // The builder's shape is checked on a compiled length first (no argument written into the SQL text), and
      // each item is cut to its declared fields with the same refusal of a missing one, so a long list means
      // exactly what a short one does.
      compile(db, 1);
      const real = (<K extends keyof A & string>(name: K) => args[name]) as ArgumentOf<A>;
      const long = build(
        db,
        real,
        items.map((item, index) => fieldsOf(item, index)),
      ).compile();
      return CompiledQuery.raw(planned(db, long.sql), [...long.parameters]) as CompiledQuery<R>;
    }
    const { sql, slots } = compile(db, items.length);
    return CompiledQuery.raw(sql, bind(slots, args, items)) as CompiledQuery<R>;
  };
  return {
    async run(db, args, items) {
      return db.executeQuery<R>(query(db, args, items));
    },
    query,
  };
}

/** `rows` cut into lists of at most {@link ROWS_PER_INSERT} rows, in order (none for an empty list). */
export function chunksOf<R>(rows: readonly R[]): R[][] {
  const chunks: R[][] = [];
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) chunks.push(rows.slice(i, i + ROWS_PER_INSERT));
  return chunks;
}
